"""Run a command under resource limits and report its own CPU time and peak memory.

    python -S capped.py MEMORY_BYTES CPU_SECONDS REPORT_FD -- ARGV...

tests/hostile/kit.py starts every entry point through this small process: it caps itself
(address space, CPU seconds, no core file, default signals), forks, and the child execs ARGV.
Forking here, not in the test process, is what makes the child's peak memory its own:
Linux carries a process's resident high-water mark across fork and exec, so a child forked
from a 100 MB pytest worker would report at least 100 MB.  The report (JSON: cpu, rss_mib)
goes to REPORT_FD; the exit status is the child's (a signal is raised again).
"""

import json
import os
import resource
import signal
import sys


def main() -> None:
    memory, cpu, report = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    argv = sys.argv[5:]
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        os.close(report)
        try:
            os.execvp(argv[0], argv)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    os.write(report, json.dumps({"cpu": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024}).encode())
    os.close(report)
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        os.kill(os.getpid(), -code)
    sys.exit(code)


if __name__ == "__main__":
    main()
