"""Answers the gateway computes itself: at once, or later when they need a store write.

A local handler returns a response body, or an awaitable of one when it must wait for I/O
(a change written to the ACL, credential or token store).  Its slot in the response queue
is reserved when the request arrives, so responses stay in request order either way.  While
one is pending, the connection's later local answers wait for it: like a Kafka broker,
which handles one request of a connection at a time, a client that creates an ACL and then
describes ACLs on the same connection sees its own change.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from protocol.messages import response_frame

if TYPE_CHECKING:
    from gateway.transport.client_connection import ClientConnection

Body = dict[str, Any]
Hook = Callable[[Body], Body] | None


def answer_locally(conn: ClientConnection, compute: Callable[[], Body | Awaitable[Body]], hook: Hook,
                   key: int, version: int, correlation_id: int) -> None:
    """Queue the answer of ``compute`` (the handler call) in this request's place."""
    if conn.local_chain is None:
        answer = compute()
        if isinstance(answer, dict):
            conn.responses.add_local(correlation_id, key, version, _encode(answer, hook, key, version, correlation_id))
            return
        pending: Awaitable[Body] | None = answer
    else:
        pending = None  # computed once the earlier local answer is done
    slot = conn.responses.add_deferred(correlation_id, key, version)
    previous = conn.local_chain

    async def complete() -> None:
        if previous is not None:
            await asyncio.shield(previous)
        try:
            result = compute() if pending is None else pending
            body = result if isinstance(result, dict) else await result
            slot.response = [_encode(body, hook, key, version, correlation_id)]
            slot.ready = True
        except Exception:  # a gateway bug: fail closed for this connection only
            conn.log.exception("local_answer_error", api_key=key)
            conn.abort("internal error while answering a request")
            return
        conn.flush_responses()

    task: asyncio.Future[None] = asyncio.ensure_future(complete())
    conn.local_chain = task

    def done(_: asyncio.Future[None]) -> None:
        if conn.local_chain is task:
            conn.local_chain = None

    task.add_done_callback(done)


def _encode(body: Body, hook: Hook, key: int, version: int, correlation_id: int) -> bytes:
    if hook is not None:  # e.g. DescribeAcls/DescribeDelegationToken filtering by the policy
        body = hook(body)
    return response_frame(key, version, correlation_id, body)
