"""Issue 48: the line a failed phase is reported by (cycle.last_error_line, in PhaseFailed and so on the console and
in status.json) is the cause, not the launcher's wrapper. The logs are trimmed copies of real ones: `accelerate launch`
of 2 CPU ranks (torch.distributed.elastic) and of accelerate's simple launcher, each over a module that raised."""

from __future__ import annotations

from opsd_sweep.cycle import last_error_line

HEADER = "\n=== 2026-12-05T16:01:39.728+00:00 train ===\n[train] 2 process(es), MULTI_CPU, cpu\n"
RANK = """[rank{r}]: Traceback (most recent call last):
[rank{r}]:   File "/work/main/src/opsd_sweep/train/trainer.py", line 435, in main
[rank{r}]:     trainer.setup()
[rank{r}]:     raise JSONDecodeError("Expecting value", s, err.value) from None
[rank{r}]: json.decoder.JSONDecodeError: Expecting value: line 2 column 1 (char {r}3)
"""
ELASTIC = """W1205 16:01:47.799000 11310 torch/distributed/elastic/multiprocessing/api.py:1028] Sending process 11316 closing signal SIGTERM
E1205 16:01:47.831000 11310 torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 1 (pid: 11317) of binary: /work/main/.venv/bin/python
Traceback (most recent call last):
  File "/work/main/.venv/lib/python3.11/site-packages/torch/distributed/launcher/api.py", line 383, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
opsd_sweep.train FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2026-12-05_16:01:47
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : -15 (pid: 11316)  (SIGTERM)
  error_file: <N/A>
  traceback : Signal 15 (SIGTERM) received by PID 11316
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-05_16:01:47
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : {code} (pid: 11317) {signal}
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


def write(tmp_path, text: str):
    log = tmp_path / "train.log"
    log.write_text("\n=== 2026-12-05T15:00:00 train ===\nValueError: an earlier attempt's\n" + HEADER + text)
    return log


def test_the_failed_ranks_exception_is_the_cause_not_child_failed_error(tmp_path):
    log = write(tmp_path, RANK.format(r=1) + RANK.format(r=0) + ELASTIC.format(code=1, signal=""))
    # rank 1 is the root cause; rank 0 printed last but was stopped after it
    assert last_error_line(log) == "json.decoder.JSONDecodeError: Expecting value: line 2 column 1 (char 13)"


def test_a_killed_rank_is_named_by_the_launchers_line_and_its_root_cause(tmp_path):
    log = write(tmp_path, ELASTIC.format(code=-9, signal=" (SIGKILL)"))
    assert last_error_line(log) == ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError; root cause: "
                                    "rank 1 exitcode -9 (SIGKILL)")


def test_the_simple_launchers_called_process_error_is_not_the_cause(tmp_path):
    log = write(tmp_path, """Traceback (most recent call last):
  File "/tmp/failmod.py", line 2, in <module>
FileNotFoundError: Couldn't find a dataset script at /x/Openthoughts_math_30k_opsd.py

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/work/main/.venv/lib/python3.11/site-packages/accelerate/commands/launch.py", line 1049, in _run_subprocess
subprocess.CalledProcessError: Command '['python', '-m', 'failmod']' returned non-zero exit status 1.
""")
    assert last_error_line(log) == "FileNotFoundError: Couldn't find a dataset script at /x/Openthoughts_math_30k_opsd.py"


def test_a_one_process_phase_is_read_as_before(tmp_path):
    assert last_error_line(write(tmp_path, "step 1\nTraceback (most recent call last):\nKeyError: 'x'\n")) == "KeyError: 'x'"
    assert last_error_line(write(tmp_path, "step 1\ntrain.max_steps must be >= 1\n")) == "train.max_steps must be >= 1"
    # a chained exception: the last one (what the code raised) is the cause
    assert last_error_line(write(tmp_path, "KeyError: 'x'\n\nDuring handling...\n\nRuntimeError: no field x\n")) \
        == "RuntimeError: no field x"
