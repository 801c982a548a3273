"""msrun's per-node form over mpirun: MindSpore starts a job over several machines with one
``msrun --worker_num=N --local_worker_num=M --master_addr=A --master_port=P --node_rank=K``
per machine, while OpenMPI starts every rank from one mpirun. kiln maps the first onto the
second: node 0 listens on A:P, each other node's msrun reports its address and rank count there,
and once the counts add up to N node 0 writes a hostfile (nodes in node_rank order, so rank r
is on the same node as under MindSpore) and runs mpirun with it; mpirun starts the other nodes'
ranks over ssh. Every node's msrun then exits with mpirun's status. docs/distributed.md.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

__all__ = ["check_args", "run_node"]

_LOCAL = ("localhost", "127.0.0.1", "::1")


def check_args(opts, error):
    """MindSpore's constraints on the counts and the node rank; error(msg) reports one."""
    if opts.worker_num < 1 or opts.local_worker_num < 1:
        error(f"--worker_num ({opts.worker_num}) and --local_worker_num "
              f"({opts.local_worker_num}) must be positive")
    if opts.local_worker_num > opts.worker_num:
        error(f"--local_worker_num={opts.local_worker_num} is more than --worker_num="
              f"{opts.worker_num}, the job's total")
    if opts.worker_num == opts.local_worker_num:
        if opts.node_rank not in (-1, 0):
            error(f"--node_rank={opts.node_rank}: a job of one node has node 0 only")
        return
    if opts.node_rank < 0:
        error("a job over several nodes (--worker_num > --local_worker_num) needs --node_rank "
              "on each node: 0 on the node at --master_addr, 1, 2, ... on the others")
    if not 0 < opts.master_port < 65536:
        error(f"--master_port must be a TCP port (1-65535), got {opts.master_port}")


def _send(sock, message):
    sock.sendall((json.dumps(message) + "\n").encode())


def _receive(sock):
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        data += chunk
    return json.loads(data)


def _hostfile(nodes):
    """Hostfile text: one line per node, node_rank order; addresses of this machine are
    localhost (their slots merged), which mpirun starts without ssh."""
    slots, order = {}, []
    for _, host, count in sorted(nodes):
        host = "localhost" if host in _LOCAL else host
        if host not in slots:
            order.append(host)
            slots[host] = 0
        slots[host] += count
    return "".join(f"{host} slots={slots[host]}\n" for host in order)


def _gather(opts, deadline):
    """Node 0: accepts the other nodes' reports until their ranks add up to --worker_num;
    returns ([(node_rank, address, count)], [sockets])."""
    server = socket.create_server(("", opts.master_port), reuse_port=False)
    server.settimeout(1.0)
    nodes, peers, total = [(0, "localhost", opts.local_worker_num)], [], opts.local_worker_num
    try:
        while total < opts.worker_num:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{total} of {opts.worker_num} ranks reported to "
                                   f"port {opts.master_port} within --cluster_time_out")
            try:
                conn, (address, _) = server.accept()
            except TimeoutError:
                continue
            conn.settimeout(max(1.0, deadline - time.monotonic()))
            report = _receive(conn)
            rank, count = int(report["node_rank"]), int(report["local_worker_num"])
            if rank in [n[0] for n in nodes] or total + count > opts.worker_num:
                _send(conn, {"error": f"node_rank {rank} with {count} ranks does not fit the "
                                      f"job of {opts.worker_num} ranks ({total} reported)"})
                conn.close()
                continue
            nodes.append((rank, address, count))
            peers.append(conn)
            total += count
    finally:
        server.close()
    return nodes, peers


def _run_master(opts, command_for):
    deadline = time.monotonic() + opts.cluster_time_out
    nodes, peers = _gather(opts, deadline)
    with tempfile.NamedTemporaryFile("w", prefix="msrun_hosts_", suffix=".txt",
                                     delete=False) as f:
        f.write(_hostfile(nodes))
    status = 1  # what the other nodes report if mpirun cannot even start
    try:
        print(f"msrun: {len(nodes)} nodes, {opts.worker_num} ranks; hostfile:\n"
              f"{_hostfile(nodes)}", end="", flush=True)
        status = subprocess.call(command_for(f.name))
    finally:
        os.unlink(f.name)
        for conn in peers:
            try:
                _send(conn, {"status": status})
            except OSError:
                pass
            conn.close()
    return status


def _run_worker(opts):
    deadline = time.monotonic() + opts.cluster_time_out
    while True:  # node 0 may not listen yet
        try:
            sock = socket.create_connection((opts.master_addr, opts.master_port), timeout=5)
            break
        except OSError as e:
            if time.monotonic() > deadline:
                raise TimeoutError(f"node {opts.node_rank} could not reach node 0 at "
                                   f"{opts.master_addr}:{opts.master_port}: {e}") from None
            time.sleep(0.5)
    with sock:
        _send(sock, {"node_rank": opts.node_rank, "local_worker_num": opts.local_worker_num})
        print(f"msrun: node {opts.node_rank} reported {opts.local_worker_num} ranks to "
              f"{opts.master_addr}:{opts.master_port}; node 0's mpirun starts them", flush=True)
        sock.settimeout(None)  # the job runs as long as it runs
        try:
            reply = _receive(sock)
        except ConnectionError:
            print("msrun: node 0's msrun ended without a status", file=sys.stderr)
            return 1
    if "error" in reply:
        print(f"msrun: {reply['error']}", file=sys.stderr)
        return 1
    return int(reply["status"])


def run_node(opts, command_for):
    """The per-node form: node 0 gathers the nodes and runs command_for(hostfile) (mpirun's
    argv); the others wait for it. Returns the job's exit status."""
    if opts.node_rank == 0:
        return _run_master(opts, command_for)
    return _run_worker(opts)
