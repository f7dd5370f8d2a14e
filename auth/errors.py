"""The authentication layer's exception type."""


class AuthenticationFailed(Exception):
    """Authentication did not succeed.

    ``str(exc)`` is for operators' logs; ``client_message`` is what the client may see,
    and never reveals whether a user exists.
    """

    def __init__(self, reason: str, client_message: str = "Authentication failed") -> None:
        super().__init__(reason)
        self.client_message = client_message
