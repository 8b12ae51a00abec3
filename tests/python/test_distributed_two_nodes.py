"""Two "nodes" on one machine: two network namespaces joined by a veth pair (made by the test with
`ip netns`), one launcher in each (--nnodes 2), two workers per node. Gloo must listen on the
address that reaches the master across the link, not on loopback. Skipped where namespaces
cannot be made (no root, no CAP_NET_ADMIN)."""
import os
import subprocess
import sys
import textwrap

import pytest

import tessera.distributed as dist
from dist_harness import free_port, package_path

pytestmark = pytest.mark.skipif(not dist.is_gloo_available(), reason="the gloo backend plugin is not built")


def _ip(*args):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def two_namespaces():
    tag = f"ts{os.getpid() % 100000}"
    a, b = f"{tag}a", f"{tag}b"
    subnet = 10 + os.getpid() % 200
    try:
        made = _ip("netns", "add", a)
    except FileNotFoundError:
        pytest.skip("the ip command (iproute2) is not installed")
    if made.returncode != 0:
        pytest.skip(f"cannot make network namespaces here: {made.stderr.strip()}")
    try:
        steps = [("netns", "add", b),
                 ("link", "add", f"{tag}va", "type", "veth", "peer", "name", f"{tag}vb"),
                 ("link", "set", f"{tag}va", "netns", a), ("link", "set", f"{tag}vb", "netns", b),
                 ("-n", a, "addr", "add", f"10.233.{subnet}.1/24", "dev", f"{tag}va"),
                 ("-n", b, "addr", "add", f"10.233.{subnet}.2/24", "dev", f"{tag}vb"),
                 ("-n", a, "link", "set", f"{tag}va", "up"), ("-n", b, "link", "set", f"{tag}vb", "up"),
                 ("-n", a, "link", "set", "lo", "up"), ("-n", b, "link", "set", "lo", "up")]
        for step in steps + [("netns", "exec", a, "true")]:
            r = _ip(*step)
            if r.returncode != 0:
                pytest.skip(f"cannot set up the namespaces: ip {' '.join(step)}: {r.stderr.strip()}")
        yield a, b, f"10.233.{subnet}.1", f"10.233.{subnet}.2"
    finally:
        _ip("netns", "del", a)
        _ip("netns", "del", b)


def test_two_nodes_across_network_namespaces(tmp_path, two_namespaces):
    ns_a, ns_b, addr_a, addr_b = two_namespaces
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent("""
        import os, socket
        import tessera as ts, tessera.distributed as dist
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        t = ts.tensor([float(rank + 1)])
        dist.all_reduce(t)
        names = [None] * world
        dist.all_gather_object(names, (rank, os.environ["GROUP_RANK"], os.environ["LOCAL_RANK"]))
        assert t.item() == world * (world + 1) / 2, t
        print("RESULT", rank, world, t.item(), names, flush=True)
        dist.destroy_process_group()
    """))
    port = free_port()
    env = dict(os.environ, PYTHONPATH=package_path())
    launchers = []
    for node, ns in enumerate((ns_a, ns_b)):
        cmd = ["ip", "netns", "exec", ns, sys.executable, "-m", "tessera.distributed.run", "--nnodes", "2",
               "--node-rank", str(node), "--nproc-per-node", "2", "--master-addr", addr_a, "--master-port", str(port),
               str(script)]
        launchers.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = []
    for p in launchers:
        try:
            outputs.append(p.communicate(timeout=120))
        except subprocess.TimeoutExpired:
            for q in launchers:
                q.kill()
            raise
    for p, (out, err) in zip(launchers, outputs):
        assert p.returncode == 0, f"{out}\n{err}"
    lines = [l for out, _ in outputs for l in out.splitlines() if "RESULT" in l]
    ranks = sorted(int(l.split("RESULT")[1].split()[0]) for l in lines)
    assert ranks == [0, 1, 2, 3]
    assert all("4 10.0" in l for l in lines)
    # every rank saw the same group/local-rank table: node 0 holds ranks 0-1, node 1 ranks 2-3
    assert all("(2, '1', '0')" in l and "(1, '0', '1')" in l for l in lines)
