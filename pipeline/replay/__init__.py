"""``ksgate audit replay``: the audit log's decisions re-evaluated against a candidate ACL set."""
