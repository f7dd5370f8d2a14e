"""Authentication: TLS contexts, the SASL server state machine and mechanisms, principals.

Everything here is sans-IO: mechanisms and the state machine consume bytes and return
decisions; the gateway owns sockets and timers.
"""
