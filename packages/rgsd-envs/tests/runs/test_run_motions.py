"""``RunDir.training_motions``: the clips a run trained on, or one line naming the config field when they are gone."""

from __future__ import annotations

import pytest
import yaml

from rgsd_envs.runs.run_dir import RunDir
from rgsd_envs.utils.files import InputFileError


def test_moved_training_clips_are_named_with_the_config_field(tmp_path):
    clips = tmp_path / "clips"
    clips.mkdir()
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({"env": {"motions": ["demo", str(clips)]}}))
    assert RunDir(tmp_path).training_motions() == ["demo", str(clips)]
    clips.rmdir()
    with pytest.raises(InputFileError, match=r"field 'env\.motions': motions not found: .*clips \(the clips") as err:
        RunDir(tmp_path).training_motions()
    assert err.value.path == str(tmp_path / "config.yaml")
