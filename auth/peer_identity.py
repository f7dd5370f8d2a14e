"""The TLS client certificate's subject, spelled exactly as Java's X500Principal.getName() spells it.

Kafka's ssl.principal.mapping.rules and ACL principals see that RFC 2253 string, so ksgate must
produce it byte for byte: RDNs last-to-first, Java's keyword set, Java's escaping, ``#hex`` otherwise.
"""

from __future__ import annotations

import ssl

# The only keywords X500Principal's RFC 2253 form uses; any other attribute is its OID.
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.9": "STREET",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "0.9.2342.19200300.100.1.1": "UID",
    "0.9.2342.19200300.100.1.25": "DC",
}
# PrintableString, T61String, IA5String, GeneralString, BMPString, UTF8String: the tags
# Java renders as text (sun.security.x509.AVA.isDerString); anything else becomes #hex.
_STRING_TAGS = frozenset({0x13, 0x14, 0x16, 0x1B, 0x1E, 0x0C})
_ESCAPED = frozenset(',=+<>#;"\\')
_SEQUENCE, _SET, _OID = 0x30, 0x31, 0x06


def _tlv(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the DER element at ``pos``."""
    if pos + 2 > len(data):
        raise ValueError("truncated DER")
    tag, length = data[pos], data[pos + 1]
    start = pos + 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or start + count > len(data):
            raise ValueError("unsupported DER length")
        length = int.from_bytes(data[start:start + count], "big")
        start += count
    end = start + length
    if end > len(data):
        raise ValueError("truncated DER")
    return tag, start, end


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, element start, content start, content end) of each element in data[start:end]."""
    out = []
    pos = start
    while pos < end:
        tag, content_start, content_end = _tlv(data, pos)
        out.append((tag, pos, content_start, content_end))
        pos = content_end
    return out


def _oid(content: bytes) -> str:
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    if not arcs:
        raise ValueError("empty OID")
    first = min(arcs[0] // 40, 2)
    return ".".join(str(arc) for arc in (first, arcs[0] - 40 * first, *arcs[1:]))


def _escape(text: str) -> str:
    # Java escapes its set anywhere in the value (not only where RFC 2253 requires), writes
    # NUL as \00, then backslashes each leading and trailing space or carriage return.
    chars = "".join("\\" + c if c in _ESCAPED else "\\00" if c == "\0" else c for c in text)
    lead = len(chars) - len(chars.lstrip(" \r"))
    trail = len(chars.rstrip(" \r"))
    return "".join("\\" + c if i < lead or i >= trail else c for i, c in enumerate(chars))


def _attribute(data: bytes, start: int, end: int) -> str:
    parts = _children(data, start, end)
    if len(parts) != 2 or parts[0][0] != _OID:
        raise ValueError("malformed AttributeTypeAndValue")
    oid = _oid(data[parts[0][2]:parts[0][3]])
    tag, element_start, content_start, content_end = parts[1]
    keyword = _RFC2253_KEYWORDS.get(oid)
    if keyword is None or tag not in _STRING_TAGS:
        return f"{keyword or oid}=#{data[element_start:content_end].hex()}"
    # Java decodes every string type's bytes as UTF-8 (even BMPString); so do we.
    return f"{keyword}={_escape(data[content_start:content_end].decode('utf-8', 'replace'))}"


def rfc2253_name(data: bytes, start: int = 0, end: int | None = None) -> str:
    """The RFC 2253 form of the DER ``Name`` (a SEQUENCE) at ``data[start:]``."""
    tag, content_start, content_end = _tlv(data, start)
    if tag != _SEQUENCE or (end is not None and content_end != end):
        raise ValueError("not a DER Name")
    rdns = []
    for set_tag, _, set_start, set_end in _children(data, content_start, content_end):
        if set_tag != _SET:
            raise ValueError("malformed RelativeDistinguishedName")
        rdns.append("+".join(_attribute(data, s, e) for t, _, s, e in _children(data, set_start, set_end)
                             if t == _SEQUENCE))
    return ",".join(reversed(rdns))


def certificate_subject(cert_der: bytes) -> str:
    """The subject of a DER certificate, as X500Principal.getName() returns it."""
    _, cert_start, cert_end = _tlv(cert_der, 0)
    tbs = _children(cert_der, cert_start, cert_end)
    if not tbs or tbs[0][0] != _SEQUENCE:
        raise ValueError("not a DER certificate")
    fields = _children(cert_der, tbs[0][2], tbs[0][3])
    if fields and fields[0][0] == 0xA0:  # [0] EXPLICIT version, absent for v1
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    if len(fields) < 5 or fields[4][0] != _SEQUENCE:
        raise ValueError("not a DER certificate")
    return rfc2253_name(cert_der, fields[4][1], fields[4][3])


def peer_subject(ssl_object: ssl.SSLObject | ssl.SSLSocket) -> str | None:
    """The verified client certificate's subject after the handshake; None if it sent none."""
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return None
    return certificate_subject(der)
