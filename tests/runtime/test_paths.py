"""runtime.paths: the one hub repository id pattern (issue 61 part 4: three regular expressions named HUB_ID once
disagreed on what a hub id is)."""

import pytest
from biobench.errors import DataError
from biobench.runtime.paths import is_hub_id
from biobench.training.corpus import check_source


@pytest.mark.parametrize("text", ["almanach/moderncamembert-base", "org/x.v2", "a-b/c_d", "org/_private",
                                  "o/" + "n" * 96])
def test_a_hub_id_with_its_owner(text):
    assert is_hub_id(text) and is_hub_id(text, owner=False)


@pytest.mark.parametrize("text", ["org/..", "org/.", "../x", "org/a..b", ".org/x", "-org/x", "org/.x", "a/b/c",
                                  "org/", "/x", "org/modèle", "org/x y", "o/" + "n" * 97, "o" * 97 + "/n", ""])
def test_not_a_hub_id(text):
    assert not is_hub_id(text) and not is_hub_id(text, owner=False)


def test_a_bare_name_is_a_dataset_id_but_not_a_model_id():
    """A model or a Space is always owner/name; a dataset may be a bare name (wikitext)."""
    assert is_hub_id("wikitext", owner=False) and not is_hub_id("wikitext")


def test_a_corpus_source_is_a_hub_dataset_or_a_path_by_the_same_pattern(tmp_path, monkeypatch):
    """training.corpus tells a missing local path from a hub dataset id with the one pattern: a bare name or
    owner/name passes (the hub answers later), what no hub id can be is a missing path."""
    monkeypatch.chdir(tmp_path)
    for source in ("wikitext", "owner/corpus-v1", "owner/corpus@v1.0", "wikitext@main",
                   "owner/corpus@refs/convert/parquet"):
        check_source(source)
    for source in ("owner/a..b", "owner/modèle", "corpus.jsonl", "a/b/c", "owner/corpus@bad rev",
                   "owner/corpus@refs/../x", "owner/corpus@../x"):
        with pytest.raises(DataError, match=f"corpus {source} does not exist"):
            check_source(source)
