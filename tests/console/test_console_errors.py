"""Engine failures become a modal, never a crash, and the session stays resumable from the console."""

from __future__ import annotations

from conftest import ScriptedSimulator, first, scripted, wait_until

from genenv_console import messages as M
from genenv_console.__main__ import make_app
from genenv_console.screens.error import ErrorScreen
from genenv_console.widgets.status_bar import StatusBar
from genenv_engine.storage.store import Store


class BrokenSimulator(ScriptedSimulator):
    """A simulator backend that fails the first time it is asked to write tasks."""

    def generate(self, prompts, sampling):
        raise RuntimeError("simulated backend failure")


def broken_factory(role, policy):
    return scripted()(role, policy) if role == "agent" else BrokenSimulator(policy)


async def test_engine_error_shows_modal_and_r_resumes(tmp_path):
    app = make_app(preset="micro", overrides={"epochs": 1}, sessions_root=tmp_path, backend_factory=broken_factory)
    msgs: list = []
    async with app.run_test(size=(140, 44), message_hook=msgs.append) as pilot:
        await wait_until(lambda: isinstance(app.screen, ErrorScreen), 90, "the error modal")
        await pilot.pause()
        failed = first(msgs, M.RunFailed)
        assert failed is not None and failed.epoch == 1 and "simulated backend failure" in failed.event.error
        details = str(app.screen.query_one("#error-details").render())
        assert "RuntimeError: simulated backend failure" in details and "Traceback" in details
        assert app.is_running and app.state.run == "failed"
        assert "failed" in app.dashboard.query_one(StatusBar).text
        with Store(app.session_path / "genenv.db") as store:
            assert [(m["epoch"], m["status"]) for m in store.epoch_metrics()] == [(0, "done"), (1, "partial")]

        await pilot.press("escape")
        assert not isinstance(app.screen, ErrorScreen)
        app.backend_factory = scripted()  # the "fix": the next run gets working backends
        await pilot.press("r")
        await wait_until(lambda: first(msgs, M.RunFinished), 90, "the resumed run")
        assert first(msgs, M.RunStarted, start_epoch=1) is not None
        with Store(app.session_path / "genenv.db") as store:
            assert [(m["epoch"], m["status"]) for m in store.epoch_metrics()] == [(0, "done"), (1, "done")]


async def test_run_key_on_a_session_another_engine_holds_is_refused_with_the_holder_named(tmp_path):
    from genenv_engine.storage import lease

    app = make_app(preset="micro", overrides={"epochs": 1}, sessions_root=tmp_path, backend_factory=scripted())
    msgs: list = []
    async with app.run_test(size=(140, 44), message_hook=msgs.append) as pilot:
        await wait_until(lambda: first(msgs, M.RunFinished), 90, "the first run")
        await pilot.pause()
        with Store(app.session_path / "genenv.db") as store:
            before = store.db.execute("select count(*) from events").fetchone()[0]
        other = lease.acquire(app.session_path, "genenv resume")  # a headless engine holds the session
        try:
            notes = len(app._notifications)
            await pilot.press("r")
            await wait_until(lambda: len(app._notifications) > notes, 30, "the refusal")
            await pilot.pause()
            text = str(list(app._notifications)[-1].message)
            assert "is being run by genenv resume (PID" in text
            assert not isinstance(app.screen, ErrorScreen) and app.state.run == "stopped"
            with Store(app.session_path / "genenv.db") as store:
                assert store.db.execute("select count(*) from events").fetchone()[0] == before
        finally:
            other.release()
