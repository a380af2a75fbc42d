"""runtime.children: a child process ends when its parent is killed (kill -9), instead of training on."""

import os
import signal
import subprocess
import sys
import time

from biobench.runtime import children

# the child process's first lines, as biobench.eval.parallel's children start
START = f"import os\nfrom {children.__name__} import {children.become_child.__name__}\nbecome_child(os.getppid())\n"
GRANDCHILD = START + "import time\nprint(os.getpid(), flush=True)\ntime.sleep(600)\n"
PARENT = ("import subprocess, sys\nchild = subprocess.Popen([sys.executable, '-c', sys.argv[1]], stdout=subprocess.PIPE, text=True)\n"
          "print(child.stdout.readline().strip(), flush=True)\nchild.wait()\n")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie (ended, not yet reaped by init) counts as gone
        return fh.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_child_dies_with_its_killed_parent():
    parent = subprocess.Popen([sys.executable, "-c", PARENT, GRANDCHILD], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    assert _alive(child)
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    for _ in range(300):  # a hang bound only: the kernel's PDEATHSIG ends it at once
        if not _alive(child):
            break
        time.sleep(0.1)
    else:
        os.kill(child, signal.SIGKILL)
        raise AssertionError("the child outlived its killed parent")


def test_a_child_ignores_ctrl_c_and_leaves_it_to_its_parent():
    code = START + "import signal\nprint(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "True"
