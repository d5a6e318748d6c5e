"""Issue 21: the summary groups runs by the recorded identities of their inputs. Seeds run before and
after a data file was edited in place are two rows, the differing input named; never one."""

from __future__ import annotations

from opsd_sweep.summarize.collect import collect
from opsd_sweep.config import load_run_config
from opsd_sweep.cycle import run_cycle
from tests.conftest import compose
from tests.reliability.test_recorded_identities import write_table


def test_one_label_with_two_data_identities_is_two_rows(tmp_path, cache_dir):
    results, data = tmp_path / "results", write_table(tmp_path / "F.jsonl", [1, 2])

    def cycle(seed: int) -> None:
        run = load_run_config(compose(["executor=simulate", "group=g", "data=local", f"data.path={data}",
                                       f"seed={seed}", f"results_root={results}", f"cache_dir={cache_dir}"]))
        assert run_cycle(run)["state"] == "done"

    cycle(1), cycle(2)
    write_table(data, [1, 3])  # edited in place: the seeds run from now on train on other data
    cycle(3), cycle(4)
    runs = collect([str(results)]).runs
    done = runs[runs["state"] == "done"]
    assert len(done) == 4 and done["label"].nunique() == 2, done[["label", "cfg.seed"]]
    by_label = done.groupby("label")["cfg.seed"].apply(sorted).to_dict()
    assert sorted(by_label.values()) == [[1, 2], [3, 4]]
    assert all(" data=F.jsonl#" in label for label in by_label), by_label  # the differing input, named
