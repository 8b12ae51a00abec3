"""`python -m tessera.distributed.run` (and the `tessera-run` script): torchrun for tessera.

    python -m tessera.distributed.run --nproc-per-node 4 train.py --lr 0.1
    python -m tessera.distributed.run --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 -m pkg.train

torchrun's options, defaults and PET_<OPTION> environment defaults; each worker gets torchrun's
environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, TORCHELASTIC_RESTART_COUNT, ...). Rendezvous
is static: --rdzv-backend c10d is accepted and means the same, nodes take their rank from
--node-rank, and an --nnodes range MIN:MAX runs MAX nodes. The agent is in _launcher.py; with
--nnodes > 1 the launchers meet on a store at MASTER_PORT + 1 (_node_group.py), so a failure on
one node stops (and, with --max-restarts, restarts) every node's workers."""
from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import uuid

from tessera.distributed._launcher import DEFAULT_SIGNALS_TO_HANDLE, LaunchConfig, WorkerGroupAgent, say
from tessera.distributed._node_group import DEFAULT_JOIN_TIMEOUT
from tessera.distributed._worker_output import DEFAULT_LINE_PREFIX, OutputConfig, parse_std_spec

DEFAULT_MASTER_ADDR = "127.0.0.1"
DEFAULT_MASTER_PORT = 29500
DEFAULT_C10D_PORT = 29400  # torchrun's port for an --rdzv-endpoint given without one
OMP_WARNING = ("\n*****************************************\n"
               "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid "
               "your system being overloaded, please further tune the variable for optimal performance in "
               "your application as needed. \n"
               "*****************************************")


class _EnvDefault(argparse.Action):
    """A valued option whose default may come from PET_<DEST>, as torchrun's options do."""

    def __init__(self, option_strings, dest, default=None, **kwargs):
        super().__init__(option_strings, dest, default=os.environ.get(f"PET_{dest.upper()}", default), **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)


class _EnvFlag(argparse.Action):
    """A flag that PET_<DEST>=1 turns on."""

    def __init__(self, option_strings, dest, default=False, **kwargs):
        from_env = os.environ.get(f"PET_{dest.upper()}", "").strip()
        super().__init__(option_strings, dest, nargs=0, default=from_env not in ("", "0") or default, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, True)


# --- argparse types: a bad value is reported as "argument --option: ..." ------------------------
def _nproc_per_node(text):
    if text in ("cpu", "gpu", "auto"):
        return text
    try:
        number = int(text)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive int, 'cpu', 'gpu' or 'auto'")
    return number


def _nnodes(text):
    """'N' or 'MIN:MAX' -> (min, max)."""
    parts = text.split(":")
    try:
        low, high = (int(parts[0]), int(parts[0])) if len(parts) == 1 else (int(parts[0]), int(parts[1]))
        ok = len(parts) <= 2 and 0 < low <= high
    except ValueError:
        ok = False
    if not ok:
        raise argparse.ArgumentTypeError(f"{text!r} is not N or MIN:MAX with 0 < MIN <= MAX")
    return low, high


def _port(text):
    try:
        number = int(text)
    except ValueError:
        number = -1
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0-65535)")
    return number


def _non_negative_int(text):
    try:
        number = int(text)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not an int >= 0")
    return number


def _positive_float(text):
    try:
        number = float(text)
    except ValueError:
        number = 0.0
    if not number > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number > 0")
    return number


def _signal_names(text):
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in names if not isinstance(getattr(signal, name, None), signal.Signals)]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown signal name(s) {unknown or text!r}")
    return names


def _rank_set(text):
    try:
        ranks = {int(item) for item in text.split(",")}
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of ints") from None
    return ranks


def get_args_parser() -> argparse.ArgumentParser:
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    parser = argparse.ArgumentParser(
        # `python -m` runs this file as run.py; the console script is tessera-run.
        prog="python -m tessera.distributed.run" if program in ("", "run.py", "-c") else program,
        description="Launch nproc-per-node copies of a script on this node (torchrun's options).")
    add = parser.add_argument
    # Sizes.
    add("--nnodes", action=_EnvDefault, type=_nnodes, default="1:1",
        help="Number of nodes, or MIN:MAX (static rendezvous runs MAX).")
    add("--nproc-per-node", "--nproc_per_node", action=_EnvDefault, type=_nproc_per_node, default="1",
        help="Workers per node: an int, 'cpu' (one per usable core), 'gpu' (one per CUDA device) or "
             "'auto' (GPUs when there are any, else CPUs).")
    # Rendezvous.
    add("--rdzv-backend", "--rdzv_backend", action=_EnvDefault, default="static", choices=("static", "c10d"),
        help="Both mean static rendezvous here: ranks come from --node-rank.")
    add("--rdzv-endpoint", "--rdzv_endpoint", action=_EnvDefault, default="",
        help="host:port of the master; overrides --master-addr/--master-port.")
    add("--rdzv-id", "--rdzv_id", action=_EnvDefault, default="none",
        help="The job id (TORCHELASTIC_RUN_ID; names the --log-dir run folder).")
    add("--rdzv-conf", "--rdzv_conf", action=_EnvDefault, default="",
        help="key=value,... (accepted for torchrun compatibility; static rendezvous reads none).")
    add("--standalone", action=_EnvFlag,
        help="Single node: a free port on 127.0.0.1 and a fresh run id; other rendezvous options are ignored.")
    # Workers.
    add("--max-restarts", "--max_restarts", action=_EnvDefault, type=_non_negative_int, default="0",
        help="Restarts of the worker group before failing.")
    add("--monitor-interval", "--monitor_interval", action=_EnvDefault, type=_positive_float, default="0.1",
        help="Seconds between checks of the workers.")
    add("--start-method", "--start_method", action=_EnvDefault, default="spawn",
        choices=("spawn", "fork", "forkserver"),
        help="Accepted for torchrun compatibility: workers are always fresh processes.")
    add("--role", action=_EnvDefault, default="default", help="The workers' role (ROLE_NAME).")
    add("-m", "--module", action=_EnvFlag, help="Run the script as a module, as 'python -m' does.")
    add("--no-python", "--no_python", action=_EnvFlag,
        help="Run the script directly, not through the Python interpreter.")
    add("--run-path", "--run_path", action=_EnvFlag,
        help="Run the script with runpy.run_path (takes precedence over --no-python).")
    add("--shutdown-timeout", "--shutdown_timeout", action=_EnvDefault, type=_positive_float,
        default=os.environ.get("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "30"),
        help="Seconds between SIGTERM and SIGKILL when the workers are stopped.")
    add("--signals-to-handle", "--signals_to_handle", action=_EnvDefault, type=_signal_names,
        default=",".join(DEFAULT_SIGNALS_TO_HANDLE),
        help="Signals the launcher catches and forwards to the workers.")
    # Output.
    add("--log-dir", "--log_dir", action=_EnvDefault, default=None,
        help="Folder for --redirects/--tee log files (a run folder <rdzv-id>_* is made in it).")
    add("-r", "--redirects", action=_EnvDefault, type=parse_std_spec, default="0",
        help="Streams sent to log files only: 0 none, 1 stdout, 2 stderr, 3 both, or '0:1,1:2' per local rank.")
    add("-t", "--tee", action=_EnvDefault, type=parse_std_spec, default="0",
        help="Streams written to log files and the console (same format as --redirects).")
    add("--log-line-prefix-template", "--log_line_prefix_template", action=_EnvDefault, default="",
        help="Prefix of each console line; ${rank} ${local_rank} ${role_name} ${hostname} "
             f"(default '{DEFAULT_LINE_PREFIX}').")
    add("--local-ranks-filter", "--local_ranks_filter", action=_EnvDefault, type=_rank_set, default=None,
        help="Only these local ranks (0,1,...) reach the console.")
    # Static rendezvous.
    add("--node-rank", "--node_rank", action=_EnvDefault, type=_non_negative_int, default="0",
        help="This node's rank (0 .. nnodes-1).")
    add("--master-addr", "--master_addr", action=_EnvDefault, default=None,
        help=f"Address of the node of rank 0 (default {DEFAULT_MASTER_ADDR}; on node 0, --local-addr when given).")
    add("--master-port", "--master_port", action=_EnvDefault, type=_port, default=None,
        help=f"Port on the master node (default {DEFAULT_MASTER_PORT}; a free port on a single node).")
    add("--local-addr", "--local_addr", action=_EnvDefault, default=None,
        help="This node's address; node 0 gives it to its workers as MASTER_ADDR when --master-addr "
             "and --rdzv-endpoint are not given.")
    # The program.
    add("training_script", help="The script (or module with -m, or program with --no-python).")
    add("training_script_args", nargs=argparse.REMAINDER)
    return parser


def parse_args(args=None) -> argparse.Namespace:
    return get_args_parser().parse_args(args)


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _local_world_size(value, parser) -> int:
    if isinstance(value, int):
        return value
    if value == "cpu":
        return _usable_cpus()
    from tessera import cuda
    gpus = cuda.device_count() if cuda.is_available() else 0
    if value == "gpu" and gpus == 0:
        parser.error("argument --nproc-per-node: 'gpu' asked for, but no CUDA device is available")
    return gpus or _usable_cpus()


def _split_endpoint(endpoint: str, default_port: int, parser):
    """'host:port', 'host' or '[v6]:port' -> (host, port)."""
    host, port = endpoint, default_port
    if endpoint.startswith("["):
        host, _, rest = endpoint[1:].partition("]")
        if rest:
            port = rest.lstrip(":")
    elif endpoint.count(":") == 1:
        host, port = endpoint.split(":")
    try:
        port = _port(str(port))
    except argparse.ArgumentTypeError:
        parser.error(f"argument --rdzv-endpoint: {endpoint!r} is not host:port")
    if not host:
        parser.error(f"argument --rdzv-endpoint: {endpoint!r} has no host")
    return host, port


def _free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, 0))
        except OSError:  # not an address of this machine: any free port
            probe.bind(("", 0))
        return probe.getsockname()[1]


def _master(args, nnodes: int, parser):
    """(MASTER_ADDR, MASTER_PORT) as static rendezvous sees them."""
    if args.standalone:
        addr = args.local_addr or DEFAULT_MASTER_ADDR
        return addr, _free_port(addr)
    if args.rdzv_endpoint:
        default_port = DEFAULT_C10D_PORT if args.rdzv_backend == "c10d" else (args.master_port or DEFAULT_MASTER_PORT)
        return _split_endpoint(args.rdzv_endpoint, default_port, parser)
    addr = args.master_addr
    if addr is None and nnodes > 1 and not (args.local_addr and args.node_rank == 0):
        say(f"--nnodes {nnodes} without --master-addr: every node's workers look for rank 0 at "
            f"{DEFAULT_MASTER_ADDR}, their own machine")
    if addr is None:
        # Node 0 is the master: its own address is the one to give out (torch's c10d rendezvous does so).
        addr = args.local_addr if args.local_addr and args.node_rank == 0 else DEFAULT_MASTER_ADDR
    if args.master_port is not None:
        return addr, args.master_port
    # Like torchrun: a single node without a port picks a free one, so two jobs on a machine don't collide.
    return addr, (_free_port(addr) if nnodes == 1 else DEFAULT_MASTER_PORT)


def _worker_command(args, parser):
    if args.run_path:
        runner = "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
        return [os.environ.get("PYTHON_EXEC", sys.executable), "-u", "-c", runner,
                args.training_script, *args.training_script_args]
    if args.no_python:
        if args.module:
            parser.error("argument --no-python: not allowed with -m/--module")
        return [args.training_script, *args.training_script_args]
    python = [os.environ.get("PYTHON_EXEC", sys.executable), "-u"]
    return python + (["-m"] if args.module else []) + [args.training_script, *args.training_script_args]


def _output_config(args, run_id: str, nproc: int) -> OutputConfig:
    output = OutputConfig(redirects=args.redirects, tee=args.tee,
                          line_prefix_template=args.log_line_prefix_template or
                          os.environ.get("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE") or DEFAULT_LINE_PREFIX,
                          local_ranks_filter=args.local_ranks_filter)
    if output.needs_files(nproc):
        import tempfile
        base = args.log_dir or tempfile.mkdtemp(prefix="tessera_elastic_")
        os.makedirs(base, exist_ok=True)
        output.log_dir = tempfile.mkdtemp(prefix=f"{run_id}_", dir=base)  # torchrun's run folder
        say(f"worker logs go to {output.log_dir}")
    return output


def config_from_args(args, parser=None):
    """(LaunchConfig, worker command) from parsed options; a bad combination is a parser error."""
    parser = parser or get_args_parser()
    min_nodes, nnodes = args.nnodes
    if min_nodes != nnodes:
        say(f"--nnodes {min_nodes}:{nnodes}: static rendezvous is not elastic; running {nnodes} nodes")
    if args.standalone:
        if nnodes != 1:
            parser.error("argument --standalone: runs a single node; --nnodes must be 1")
        args.rdzv_id = str(uuid.uuid4())
    if args.node_rank >= nnodes:
        parser.error(f"argument --node-rank: {args.node_rank} is not below --nnodes {nnodes}")
    nproc = _local_world_size(args.nproc_per_node, parser)
    omp_num_threads = None
    if nproc > 1 and "OMP_NUM_THREADS" not in os.environ:
        omp_num_threads = "1"
        say(OMP_WARNING)
    master_addr, master_port = _master(args, nnodes, parser)
    join_timeout = _rdzv_conf(args.rdzv_conf, parser).get("join_timeout", DEFAULT_JOIN_TIMEOUT)
    config = LaunchConfig(
        nproc_per_node=nproc, nnodes=nnodes, node_rank=args.node_rank, master_addr=master_addr,
        master_port=master_port, run_id=args.rdzv_id, role=args.role, max_restarts=args.max_restarts,
        monitor_interval=args.monitor_interval, shutdown_timeout=args.shutdown_timeout,
        signals_to_handle=args.signals_to_handle, omp_num_threads=omp_num_threads,
        output=_output_config(args, args.rdzv_id, nproc), join_timeout=join_timeout)
    return config, _worker_command(args, parser)


def _rdzv_conf(text: str, parser) -> dict:
    """--rdzv-conf key=value,...: join_timeout (seconds the launchers of a multi-node run wait for
    each other) is used; torch's other keys are accepted and ignored."""
    conf = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"argument --rdzv-conf: {item!r} is not key=value")
        conf[key.strip()] = value.strip()
    if "join_timeout" in conf:
        try:
            conf["join_timeout"] = float(conf["join_timeout"])
        except ValueError:
            parser.error(f"argument --rdzv-conf: join_timeout must be a number of seconds, got {conf['join_timeout']!r}")
        if conf["join_timeout"] <= 0:
            parser.error("argument --rdzv-conf: join_timeout must be positive")
    return conf


def run(args) -> int:
    config, cmd = config_from_args(args)
    return WorkerGroupAgent(config, cmd, what=args.training_script).run()


def main(args=None) -> int:
    """The console script: parse `args` (default sys.argv[1:]), launch, return the exit code."""
    parser = get_args_parser()
    parsed = parser.parse_args(args)
    config, cmd = config_from_args(parsed, parser)
    return WorkerGroupAgent(config, cmd, what=parsed.training_script).run()


if __name__ == "__main__":
    sys.exit(main())
