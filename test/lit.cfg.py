# lit configuration for hypipe: dialect tests (test/hybrid) and CLI tests (test/cli).
import os
import lit.formats

config.name = "hypipe"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.hypipe_obj_root, "test")
config.excludes = ["gpu-kit", "check_training.py", "compare_logs.py", "unit", "conformance", "fuzz", "reference", "Inputs", "CMakeLists.txt", "lit.cfg.py"]

# MLIR's convention (the standalone example): FileCheck from
# LLVM's tools, hypipe's own tools substituted by their built paths
# (`not` stays lit's builtin: a RUN line that pgreps a command line must
# not find a `not` process carrying it).
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.hypipe_tools_dir, append_path=True)
llvm_config.add_tool_substitutions(
    [ToolSubst(name, unresolved="fatal") for name in ("FileCheck",)],
    [config.llvm_tools_dir])
# Not inside quotes: a RUN line's text that names the tool (a README
# section, a shell snippet) stays as written; the PATH above finds those.
llvm_config.add_tool_substitutions(
    [ToolSubst(name, pre=".-^/\\<`'\"", unresolved="fatal") for name in
     ("hypipe", "hypipe-opt", "hypipe-run", "hypipe-transport-tests")],
    [config.hypipe_tools_dir])
config.substitutions.append(("%examples", os.path.join(config.hypipe_src_root, "examples")))
config.substitutions.append(("%src", config.hypipe_src_root))
config.substitutions.append(("%bindir", config.hypipe_tools_dir))
config.substitutions.append(("%builddir", config.hypipe_obj_root))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "cli", "Inputs")))
config.substitutions.append(("%python", "/usr/bin/python3"))
# Real multi-process runs; as root Open MPI needs the flag, and the tests
# start more ranks than this machine has cores.
config.substitutions.append(("%mpirun", "mpirun --allow-run-as-root --oversubscribe"))
config.substitutions.append(("%e2e", os.path.join(config.test_source_root, "e2e", "Inputs")))
config.substitutions.append(("%bench", os.path.join(config.hypipe_src_root, "bench", "specs")))
config.substitutions.append(("%reference", os.path.join(config.test_source_root, "reference")))
# Built with the CUDA toolkit: the cuda target compiles (what needs a GPU
# runs in the GPU kit instead, scripts/gpu-kit.sh).
if config.hypipe_cuda == "ON":
    config.available_features.add("cuda")
# A private mount namespace (root): tests that hide a library from a run.
import subprocess as _subprocess
if _subprocess.call(["unshare", "-m", "true"], stdout=_subprocess.DEVNULL,
                    stderr=_subprocess.DEVNULL) == 0:
    config.available_features.add("unshare")
# Stand-in hosts (scripts/multihost/hosts.sh: network namespaces joined by a
# bridge, issue 38): test/multihost runs where they can be made, and says
# why not where they cannot (lit then reports those tests UNSUPPORTED).
import subprocess as _subprocess
_hosts = os.path.join(config.hypipe_src_root, "scripts", "multihost", "hosts.sh")
_check = _subprocess.run(["bash", _hosts, "check"], capture_output=True, text=True)
if _check.returncode == 0:
    config.available_features.add("multihost")
else:
    lit_config.note("multihost tests skipped: " + (_check.stdout or _check.stderr).strip())
config.substitutions.append(("%multihost", os.path.join(config.hypipe_src_root, "scripts", "multihost")))
# The stand-in hosts' tests one at a time (test/multihost/lit.local.cfg):
# each starts daemons and kills ranks on several hosts at once.
lit_config.parallelism_groups["multihost"] = 1
_slurm = _subprocess.run(["bash", os.path.join(config.hypipe_src_root, "scripts", "multihost", "slurm.sh"), "check"],
                         capture_output=True, text=True)
if _slurm.returncode == 0:
    config.available_features.add("slurm")
else:
    lit_config.note("srun tests skipped: " + (_slurm.stdout or _slurm.stderr).strip())
# Hugging Face transformers: PyTorch 2 and transformers 5 in the virtual
# environment scripts/python-env.sh makes (outside the source tree; the
# README's test command runs it), or next to the system PyTorch (the lent GPU
# machine). %hf_python runs it; without one the tests that need it are
# UNSUPPORTED (scripts/python-env.sh says why it could not install).
import subprocess
hf_venv = os.environ.get("HYPIPE_VENV", os.path.expanduser("~/.cache/hypipe/venv"))
def python_that_runs(statement):
    """The first of the venv's python and the system's that runs `statement`."""
    for candidate in (os.path.join(hf_venv, "bin", "python"), "/usr/bin/python3"):
        if os.access(candidate, os.X_OK) and subprocess.call(
                [candidate, "-c", statement],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) == 0:
            return candidate
    return None
hf_python = python_that_runs("import torch, transformers")
if hf_python:
    config.available_features.add("transformers")
    config.substitutions.append(("%hf_python", hf_python))
# megatron-core's RankGenerator (parallel_state), which scripts/python-env.sh
# adds to the same environment without its dependencies: %megatron_python
# runs it for test/cli/grid.test; without it that test is UNSUPPORTED.
megatron_python = python_that_runs(
    "from megatron.core.parallel_state import RankGenerator")
if megatron_python:
    config.available_features.add("megatron")
    config.substitutions.append(("%megatron_python", megatron_python))
# TensorBoard's own event reader (EventAccumulator), which
# scripts/python-env.sh adds to the same environment: %tensorboard_python
# runs it for test/e2e/tensorboard.test; without it that test is UNSUPPORTED.
tensorboard_python = python_that_runs(
    "from tensorboard.backend.event_processing.event_accumulator import EventAccumulator")
if tensorboard_python:
    config.available_features.add("tensorboard")
    config.substitutions.append(("%tensorboard_python", tensorboard_python))
