"""Runs a PyTorch program with `import torch` answered by tessera.

    python torch_as_tessera.py PROGRAM.py [program arguments...]     # run the script as __main__
    run_main(program_path, steps, weights_path=None, data_seed=0)     # from a test: its main() losses

`install()` makes `torch` and every `torch.<sub>` module name resolve to tessera's module of the
same dotted path (tessera.nn.functional for torch.nn.functional, and so on): the commonly used
ones are aliased eagerly, any other is found on import by a meta-path finder, so a submodule
tessera lacks fails with ModuleNotFoundError naming it. It must run before the program is
imported and in a process where real torch was never imported, so run_main starts a fresh
Python process for each program (sys.modules clean), and returns the losses as JSON on a pipe.
"""
import importlib
import importlib.abc
import importlib.util
import json
import os
import runpy
import subprocess
import sys

# Submodules the programs import by name; aliased eagerly so `import torch.nn.functional as F`
# and `torch.optim.lr_scheduler.StepLR` both see the same module objects.
SUBMODULES = (
    "nn", "nn.functional", "nn.init", "nn.utils", "nn.utils.rnn", "nn.parameter", "nn.modules",
    "optim", "optim.lr_scheduler", "utils", "utils.data", "distributions", "amp", "autograd",
)


class _TorchAliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """torch.X.Y -> the module tessera.X.Y (imported on demand), registered under both names."""

    def find_spec(self, fullname, path, target=None):
        if not fullname.startswith("torch."):
            return None
        target_name = "tessera." + fullname[len("torch."):]
        if importlib.util.find_spec(target_name) is None:
            return None  # -> ModuleNotFoundError: No module named 'torch.X'
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):
        return importlib.import_module("tessera." + spec.name[len("torch."):])

    def exec_module(self, module):
        pass  # already executed as the tessera module


def install():
    """Maps `torch` (and its submodules) to tessera in this process."""
    if "torch" in sys.modules and not getattr(sys.modules["torch"], "__name__", "").startswith("tessera"):
        raise RuntimeError("real torch is already imported in this process; use a fresh process")
    import tessera
    sys.modules["torch"] = tessera
    for sub in SUBMODULES:
        sys.modules["torch." + sub] = importlib.import_module("tessera." + sub)
    if not any(isinstance(f, _TorchAliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchAliasFinder())
    return tessera


def load_program(path, module_name=None):
    """Imports the program file at `path` as a module (not as __main__)."""
    name = module_name or "compat_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _tessera_pythonpath():
    """The folder that holds the tessera package this process would import (for the child)."""
    spec = importlib.util.find_spec("tessera")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.dirname(os.path.abspath(list(spec.submodule_search_locations)[0]))


def run_main(program_path, steps, weights_path=None, data_seed=0, timeout=120, env=None):
    """Runs program.main(steps, weights_path, data_seed) on tessera in a fresh process; its losses."""
    child_env = dict(os.environ if env is None else env)
    # On a loaded machine OpenMP's default busy-waiting makes tessera's CPU kernels that open a
    # parallel region per call (the LSTM layer's) vary 100x in time; passive waiting keeps the
    # run times steady. It changes no result.
    child_env.setdefault("OMP_WAIT_POLICY", "passive")
    tessera_dir = _tessera_pythonpath()
    if tessera_dir:
        child_env["PYTHONPATH"] = os.pathsep.join(p for p in (tessera_dir, child_env.get("PYTHONPATH")) if p)
    request = json.dumps({"program": os.path.abspath(program_path), "steps": steps,
                          "weights_path": weights_path, "data_seed": data_seed})
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--run-main", request],
                          capture_output=True, text=True, timeout=timeout, env=child_env)
    if proc.returncode != 0:
        raise RuntimeError(f"{os.path.basename(program_path)} failed on tessera (exit {proc.returncode}):\n"
                           f"{proc.stderr[-6000:]}")
    marker = "COMPAT_LOSSES "
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(marker)]
    if not lines:
        raise RuntimeError(f"no losses from {program_path}; stdout:\n{proc.stdout[-3000:]}")
    return json.loads(lines[-1][len(marker):])


def _child_run_main(request):
    req = json.loads(request)
    install()
    sys.path.insert(0, os.path.dirname(req["program"]))
    module = load_program(req["program"])
    losses = module.main(req["steps"], weights_path=req["weights_path"], data_seed=req["data_seed"])
    print("COMPAT_LOSSES " + json.dumps([float(x) for x in losses]), flush=True)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--run-main":
        _child_run_main(sys.argv[2])
    elif len(sys.argv) >= 2:
        install()
        program = os.path.abspath(sys.argv[1])
        sys.argv = [program] + sys.argv[2:]
        sys.path.insert(0, os.path.dirname(program))
        runpy.run_path(program, run_name="__main__")
    else:
        sys.exit(__doc__)
