"""runtime.keys: an unknown key of a file a person wrote is refused in one line with the closest valid name."""

import pytest
from biobench.errors import ConfigError
from biobench.runtime.keys import check_keys


def test_known_keys_pass():
    check_keys(["lr", "epochs"], ("epochs", "lr", "seeds"), "grid.toml [[grid]] 1")


def test_an_unknown_key_names_the_place_the_closest_name_and_the_valid_ones():
    with pytest.raises(ConfigError) as err:
        check_keys(["epochs", "learning_rat"], ["learning_rate", "epochs"], "grid.toml [[grid]] 1", "setting")
    assert str(err.value) == ("grid.toml [[grid]] 1: unknown setting 'learning_rat': did you mean 'learning_rate'? "
                              "(valid here: epochs, learning_rate)")


def test_no_close_name_and_no_valid_key_at_all():
    with pytest.raises(ConfigError, match=r"^spec.json: unknown key 'zzz': \(valid here: a, b\)$"):
        check_keys(["zzz"], ["b", "a"], "spec.json")
    with pytest.raises(ConfigError, match=r"\(valid here: none\)$"):
        check_keys(["x"], [], "spec.json")
