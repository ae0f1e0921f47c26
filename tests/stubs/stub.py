"""A stand-in for a program the generated scripts run: deepspeed, colossalai, sshd, ...

tests/scriptkit.py installs a copy under each program's name, with a shebang to the test's
Python.  Every call appends one JSON line to $STUB_LOG:
    {"prog": name, "argv": [args...], "env": {...}, "cwd": ..., "pid": ..., "event": "call"}
Then, by environment (NAME = the program's name upper-cased, other characters as `_`):
- STUB_EXEC_<NAME>=<JSON list>: exec that argv, then ours, then STUB_APPEND_<NAME> (a JSON
  list); the python3 stub uses it to run the real wait_for_peers.py on test ports;
- STUB_BLOCK_<NAME>=<path>: create <path>, then sleep until SIGTERM or SIGINT, record
  {"event": "signal", "signal": N} and exit (a config test, `sshd ... -t`, returns at once,
  as the real one does, so a blocking sshd can stand for DeepSpeed's background sshd);
- STUB_AWAIT_<NAME>=<path>: before anything, wait (20 s at most) until <path> exists: with a
  blocking sshd's STUB_BLOCK_SSHD path, a later step waits until the background sshd has
  recorded its call (under load the script could end first, and its call was never logged);
- STUB_EXIT_<NAME>=<code>: the exit code (also after a signal); default 0.
The python3 stub runs `-c` code with the real Python (the launch scripts list env names so).
"""

import json
import os
import re
import signal
import sys
import time

NAME = os.path.basename(sys.argv[0])
KEY = re.sub(r"[^A-Z0-9]", "_", NAME.upper())


def record(event, **extra):
    line = {"prog": NAME, "event": event, "pid": os.getpid(), **extra}
    with open(os.environ["STUB_LOG"], "a", encoding="utf-8") as f:
        f.write(json.dumps(line, ensure_ascii=False) + "\n")


def main():
    code = int(os.environ.get(f"STUB_EXIT_{KEY}", "0"))
    awaited, until = os.environ.get(f"STUB_AWAIT_{KEY}"), time.monotonic() + 20
    while awaited and not os.path.exists(awaited) and time.monotonic() < until:
        time.sleep(0.01)
    record("call", argv=sys.argv[1:], env=dict(os.environ), cwd=os.getcwd())
    if NAME == "python3" and sys.argv[1:2] == ["-c"]:
        os.execv(sys.executable, [sys.executable, "-SE", *sys.argv[1:3]])
    exe = os.environ.get(f"STUB_EXEC_{KEY}")
    if exe:
        argv = [
            *json.loads(exe),
            *sys.argv[1:],
            *json.loads(os.environ.get(f"STUB_APPEND_{KEY}", "[]")),
        ]
        os.execv(argv[0], argv)
    block = os.environ.get(f"STUB_BLOCK_{KEY}")
    if block and not (NAME == "sshd" and "-t" in sys.argv[1:]):

        def stop(signum, frame):
            record("signal", signal=signum)
            sys.exit(code)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        with open(block, "w", encoding="utf-8"):
            pass
        while True:
            time.sleep(60)
    return code


if __name__ == "__main__":
    sys.exit(main())
