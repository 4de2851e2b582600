"""Shared start of the oracle cross-check tests (test_*_oracle.py): install the @noble
packages through tests/oracle/install.sh and find the C tool that speaks for our side.

    node_modules, tool, rc = oracle_setup.prepare("noise-ik-peer", "NOISE_IK_PEER")
    if rc is not None: return rc   # 77 = skipped (no node/npm/registry), 1 = failure

Standard library only; messages go to stdout like the rest of the black-box suite.
"""

import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP = 77


def prepare(tool_name, env_override):
    """Returns (node_modules, tool_path, None) or (None, None, exit_code)."""
    inst = subprocess.run(["bash", os.path.join(ROOT, "tests/oracle/install.sh")],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if inst.returncode == SKIP:
        print("SKIP: " + inst.stderr.strip())
        return None, None, SKIP
    if inst.returncode != 0:
        print("FAIL: tests/oracle/install.sh exited %d: %s" % (inst.returncode, inst.stderr))
        return None, None, 1
    tool = os.environ.get(env_override) or os.path.join(os.environ.get("EXEC_BUILD_DIR", ""),
                                                        tool_name)
    if not os.access(tool, os.X_OK):
        print("FAIL: %s not built (set EXEC_BUILD_DIR or %s)" % (tool, env_override))
        return None, None, 1
    return inst.stdout.strip(), tool, None
