"""The lab's JupyterLab settings: no news pop-up over the first projector screen."""

import json

from ropepool.cli import lab


def test_the_lab_starts_without_the_news_pop_up(tmp_path):
    """The workspace holds JupyterLab overrides that turn the news question and the update check off,
    and the server's argv points at them."""
    lab.sync_workspace(tmp_path, lab.NOTEBOOKS)
    overrides = json.loads((tmp_path / ".lab-settings" / "overrides.json").read_text())
    assert overrides["@jupyterlab/apputils-extension:notification"] == {"fetchNews": "false", "checkForUpdates": False}
    assert f"--LabApp.app_settings_dir={tmp_path / '.lab-settings'}" in lab.lab_command(8888, False, tmp_path)
