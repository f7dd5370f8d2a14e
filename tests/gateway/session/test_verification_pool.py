"""The password-verification pool: jobs run off the event loop, results come back on it, the queue is bounded."""

from __future__ import annotations

import asyncio
import threading

from gateway.transport.verification_pool import VerificationPool


def test_jobs_run_on_a_worker_thread_and_results_return_on_the_loop() -> None:
    async def main() -> tuple[bytes | BaseException, str, str]:
        loop_thread = threading.current_thread().name
        pool = VerificationPool(threads=1, queue_size=4)
        seen: dict[str, str] = {}
        got: asyncio.Future[bytes | BaseException] = asyncio.get_running_loop().create_future()

        def job() -> bytes:
            seen["job"] = threading.current_thread().name
            return b"hash"

        def done(result: bytes | BaseException) -> None:
            seen["done"] = threading.current_thread().name
            got.set_result(result)

        assert pool.submit(job, done)
        result = await got
        pool.close()
        assert seen["done"] == loop_thread
        return result, seen["job"], loop_thread

    result, job_thread, loop_thread = asyncio.run(main())
    assert result == b"hash"
    assert job_thread != loop_thread and job_thread.startswith("ksgate-verify")


def test_a_full_queue_refuses_the_job_instead_of_queueing_it() -> None:
    async def main() -> list[bool]:
        pool = VerificationPool(threads=1, queue_size=2)
        release = threading.Event()
        finished = asyncio.Event()
        results: list[bytes | BaseException] = []

        def blocked() -> bytes:
            release.wait(10)
            return b"x"

        def done(result: bytes | BaseException) -> None:
            results.append(result)
            if len(results) == 2:
                finished.set()

        accepted = [pool.submit(blocked, done) for _ in range(3)]
        assert pool.pending == 2
        release.set()
        await finished.wait()
        accepted.append(pool.submit(blocked, done))  # room again once the jobs finished
        pool.close()
        return accepted

    assert asyncio.run(main()) == [True, True, False, True]


def test_a_failing_job_reports_its_exception() -> None:
    async def main() -> bytes | BaseException:
        pool = VerificationPool()
        got: asyncio.Future[bytes | BaseException] = asyncio.get_running_loop().create_future()

        def broken() -> bytes:
            raise ValueError("boom")

        pool.submit(broken, got.set_result)
        result = await got
        pool.close()
        return result

    assert isinstance(asyncio.run(main()), ValueError)
