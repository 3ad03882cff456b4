"""Who is gone among silent submitters: a driver Ray says is alive is kept however long it is
silent; one Ray says is dead, or one Ray cannot say anything of, is gone after the timeout."""

from __future__ import annotations

from ondevice_farm.controller.submitters import SubmitterWatch


def test_a_silent_submission_is_kept_while_its_driver_lives_and_gone_once_it_dies() -> None:
    watch = SubmitterWatch(timeout_s=30)
    watch.opened("paused", now=0.0, driver_job_id="01000000")
    watch.opened("http", now=0.0)  # no driver named: silence decides
    assert watch.silent(now=29.0) == []
    silent = watch.silent(now=31.0)
    assert sorted(silent) == ["http", "paused"] and watch.needs_drivers(silent)
    assert watch.gone(silent, alive={"01000000"}) == ["http"]
    assert sorted(watch.gone(silent, alive=set())) == ["http", "paused"]
    assert sorted(watch.gone(silent, alive=None)) == ["http", "paused"]  # Ray could not say


def test_a_poll_or_a_close_ends_the_silence() -> None:
    watch = SubmitterWatch(timeout_s=30)
    watch.opened("s", now=0.0, driver_job_id="02000000")
    watch.polled("s", until=40.0)
    assert watch.silent(now=60.0) == []
    watch.closed("s")
    assert watch.silent(now=1000.0) == [] and not watch.needs_drivers(["s"])
