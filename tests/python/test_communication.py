"""kiln.communication in one process (not started by mpirun): a world of one rank, where the
collectives are the identity in both modes, their gradients, argument errors, the auto-parallel
context, DistributedGradReducer and TrainOneStepCell's data-parallel path. The 2-rank behaviour
is tested by test_distributed.py."""
import numpy as np
import pytest

import kiln as ms
from kiln import nn, ops
from kiln.communication import (
    GlobalComm,
    comm_func,
    create_group,
    destroy_group,
    get_group_rank_from_world_rank,
    get_group_size,
    get_local_rank,
    get_process_group_ranks,
    get_rank,
    get_world_rank_from_group_rank,
    init,
)

X = np.arange(6, dtype=np.float32).reshape(3, 2)


@pytest.fixture(autouse=True)
def _single_rank(monkeypatch):
    for name in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"):
        monkeypatch.delenv(name, raising=False)
    init()
    yield
    ms.reset_auto_parallel_context()
    ms.set_context(mode=ms.PYNATIVE_MODE)


def test_init_outside_a_launcher_is_a_world_of_one():
    assert GlobalComm.INITED
    assert GlobalComm.WORLD_COMM_GROUP == "mccl_world_group"
    assert (get_rank(), get_group_size(), get_local_rank()) == (0, 1, 0)
    assert get_process_group_ranks() == [0]
    init()  # a second call is a no-op


def _collectives(x):
    return (ops.AllReduce()(x), ops.AllReduce(ops.ReduceOp.MAX)(x), ops.AllGather()(x),
            ops.ReduceScatter()(x), ops.Broadcast(0)((x,))[0])


@pytest.mark.parametrize("graph", [False, True])
def test_collectives_on_one_rank_are_the_identity(graph):
    fn = ms.jit(_collectives) if graph else _collectives
    for out in fn(ms.Tensor(X)):
        np.testing.assert_array_equal(out.asnumpy(), X)
    assert ops.Barrier()() is not None and comm_func.barrier() is None


@pytest.mark.parametrize("graph", [False, True])
def test_collective_gradients_on_one_rank(graph):
    def loss(x):
        a, m, g, s, b = _collectives(x)
        return (a * 2 + m * 3 + g * 4 + s * 5 + b * 6).sum()

    grad = ms.grad(ms.jit(loss) if graph else loss)(ms.Tensor(X))
    np.testing.assert_allclose(grad.asnumpy(), np.full_like(X, 20.0))


def test_dtypes_keep_their_type():
    for dtype in (np.float64, np.float16, np.int32, np.int64, np.uint8, np.bool_):
        out = ops.AllReduce()(ms.Tensor(X.astype(dtype)))
        assert out.asnumpy().dtype == dtype
        np.testing.assert_array_equal(out.asnumpy(), X.astype(dtype))


def test_comm_func_forms():
    out, handle = comm_func.all_reduce(ms.Tensor(X))
    assert handle is None
    np.testing.assert_array_equal(out.asnumpy(), X)
    out, handle = comm_func.all_reduce(ms.Tensor(X), op=ops.ReduceOp.MAX, async_op=True)
    assert ms._C.comm_pending_count() == 1  # started, not finished
    assert handle.wait() is None and handle.wait() is None
    assert ms._C.comm_pending_count() == 0
    np.testing.assert_array_equal(out.asnumpy(), X)
    with pytest.raises(TypeError, match="async_op"):
        comm_func.all_reduce(ms.Tensor(X), async_op=1)
    out, handle = comm_func.all_gather_into_tensor(ms.Tensor(X), async_op=True)
    assert handle.wait() is None
    np.testing.assert_array_equal(out.asnumpy(), X)
    out, _ = comm_func.reduce_scatter_tensor(ms.Tensor(X), op=ops.ReduceOp.MIN)
    np.testing.assert_array_equal(out.asnumpy(), X)
    np.testing.assert_array_equal(comm_func.broadcast(ms.Tensor(X), 0).asnumpy(), X)


def test_bad_arguments_are_clear_errors():
    with pytest.raises(ValueError, match="AllReduce.*'avg'"):
        ops.AllReduce("avg")
    with pytest.raises(TypeError, match="AllReduce.*op"):
        ops.AllReduce(1)
    with pytest.raises(TypeError, match="AllGather.*group"):
        ops.AllGather(group=3)
    with pytest.raises(TypeError, match="AllReduce.*Tensor"):
        ops.AllReduce()(X)
    with pytest.raises(TypeError, match="Broadcast.*tuple"):
        ops.Broadcast(0)(ms.Tensor(X))
    with pytest.raises(ValueError, match="group 'nope' does not exist"):
        ops.AllReduce(group="nope")(ms.Tensor(X))
    with pytest.raises(ValueError, match="all_gather.*0-d"):
        ops.AllGather()(ms.Tensor(1.0))
    with pytest.raises(ValueError, match="root_rank 1 is outside the group of 1"):
        ops.Broadcast(1)((ms.Tensor(X),))
    with pytest.raises(TypeError, match="all_reduce"):
        comm_func.all_reduce(X)


def test_groups_on_one_rank():
    create_group("solo", [0])
    try:
        assert get_group_size("solo") == 1 and get_rank("solo") == 0
        assert get_world_rank_from_group_rank("solo", 0) == 0
        assert get_group_rank_from_world_rank(0, "solo") == 0
        np.testing.assert_array_equal(ops.AllReduce(group="solo")(ms.Tensor(X)).asnumpy(), X)
        with pytest.raises(ValueError, match="already exists"):
            create_group("solo", [0])
    finally:
        destroy_group("solo")
    with pytest.raises(ValueError, match="outside the world"):
        create_group("far", [0, 1])
    with pytest.raises(TypeError, match="rank_ids"):
        create_group("bad", "0")


def test_auto_parallel_context():
    assert ms.get_auto_parallel_context("parallel_mode") == ms.ParallelMode.STAND_ALONE
    assert ms.get_auto_parallel_context("device_num") == 1
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL,
                                 gradients_mean=True, device_num=4)
    assert ms.get_auto_parallel_context("parallel_mode") == "data_parallel"
    assert ms.get_auto_parallel_context("gradients_mean") is True
    assert ms.get_auto_parallel_context("device_num") == 4
    assert ms.context.get_auto_parallel_context("device_num") == 4
    ms.reset_auto_parallel_context()
    assert ms.get_auto_parallel_context("gradients_mean") is False
    with pytest.raises(ValueError, match="unknown key"):
        ms.set_auto_parallel_context(bogus=1)
    with pytest.raises(ValueError, match="parallel_mode"):
        ms.set_auto_parallel_context(parallel_mode="everything")
    with pytest.raises(NotImplementedError, match="shards operators"):
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.SEMI_AUTO_PARALLEL)
    with pytest.raises(TypeError, match="gradients_mean"):
        ms.set_auto_parallel_context(gradients_mean=1)


@pytest.mark.parametrize("graph", [False, True])
def test_distributed_grad_reducer_mean_divides_by_degree(graph):
    params = [ms.Parameter(ms.Tensor(X), name="w")]
    reducer = nn.DistributedGradReducer(params, mean=True, degree=4)
    plain = nn.DistributedGradReducer(params, mean=False)
    grads = (ms.Tensor(X), None)
    run = ms.jit(reducer.construct) if graph else reducer
    out = run(grads)
    np.testing.assert_allclose(out[0].asnumpy(), X / 4)
    assert out[1] is None
    np.testing.assert_array_equal(plain(grads)[0].asnumpy(), X)
    with pytest.raises(ValueError, match="degree"):
        nn.DistributedGradReducer(params, degree=0)


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_train_one_step_cell_in_data_parallel_on_one_rank_trains_as_stand_alone(mode):
    ms.set_context(mode=mode)
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((8, 4)).astype(np.float32), rng.standard_normal((8, 2))

    def train(parallel):
        ms.reset_auto_parallel_context()
        if parallel:
            ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL,
                                         gradients_mean=True)
        ms.set_seed(3)
        net = nn.Dense(4, 2)
        step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()),
                                   nn.SGD(net.trainable_params(), 0.1))
        assert step.reducer_flag == parallel
        for _ in range(3):
            step(ms.Tensor(x), ms.Tensor(y.astype(np.float32)))
        return [p.asnumpy() for p in net.trainable_params()]

    for a, b in zip(train(True), train(False)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_gradients_travel_in_buckets():
    from kiln.nn.wrap import grad_reducer

    params = [ms.Parameter(ms.Tensor(np.zeros(s, np.float32)), name=f"p{i}")
              for i, s in enumerate([(3, 2), (2,), (4,)])]
    params.append(ms.Parameter(ms.Tensor(np.zeros(5, np.float64)), name="p3"))
    # last parameters first (the backward pass finishes their gradients first)
    assert grad_reducer._bucket_plan(params, 1 << 20) == ((3,), (0, 1, 2))
    assert grad_reducer._bucket_plan(params, 24) == ((3,), (1, 2), (0,))  # 16 + 8 bytes fit
    assert grad_reducer._bucket_plan(params, 23) == ((3,), (2,), (1,), (0,))
    reducer = nn.DistributedGradReducer(params, mean=True, degree=2)
    rng = np.random.default_rng(0)
    grads = tuple(ms.Tensor(rng.standard_normal(p.shape).astype(p.asnumpy().dtype))
                  for p in params)
    for run in (reducer, ms.jit(reducer.construct)):
        out = run(grads)
        assert [o.shape for o in out] == [p.shape for p in params]
        for o, g in zip(out, grads):
            assert o.dtype == g.dtype
            np.testing.assert_allclose(o.asnumpy(), g.asnumpy() / 2, rtol=1e-6)


def test_a_compiled_training_step_sends_one_all_reduce_per_bucket(tmp_path):
    ms.set_context(mode=ms.GRAPH_MODE, save_graphs=True, save_graphs_path=str(tmp_path))
    try:
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL)
        net = nn.SequentialCell(nn.Dense(4, 3), nn.ReLU(), nn.Dense(3, 2))
        step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()),
                                   nn.SGD(net.trainable_params(), 0.1))
        step(ms.Tensor(np.ones((2, 4), np.float32)), ms.Tensor(np.ones((2, 2), np.float32)))
    finally:
        ms.set_context(save_graphs=False)
    optimized = [p.read_text() for p in tmp_path.glob("*optimized.ir")]
    assert optimized, list(tmp_path.iterdir())
    # overlapped (the default): the one bucket's all-reduce in two halves
    assert optimized[-1].count("all_reduce_start(") == 1, optimized[-1]
    assert optimized[-1].count("all_reduce_wait(") == 1, optimized[-1]
    assert optimized[-1].count("all_reduce(") == 0, optimized[-1]


def _training_step_ir(tmp_path, sizes):
    """The optimized IR of a compiled data-parallel step of Dense layers `sizes`."""
    ms.set_context(mode=ms.GRAPH_MODE, save_graphs=True, save_graphs_path=str(tmp_path))
    try:
        ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL)
        layers = []
        for a, b in zip(sizes, sizes[1:]):
            layers += [nn.Dense(a, b), nn.ReLU()]
        net = nn.SequentialCell(layers[:-1])
        step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()),
                                   nn.SGD(net.trainable_params(), 0.1))
        x = ms.Tensor(np.ones((2, sizes[0]), np.float32))
        step(x, ms.Tensor(np.ones((2, sizes[-1]), np.float32)))
    finally:
        ms.set_context(save_graphs=False)
    texts = [p.read_text() for p in tmp_path.glob("*optimized.ir")]
    return next(t for t in texts if "all_reduce" in t), step


def test_a_compiled_step_starts_buckets_before_its_backward_pass_ends(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_GRAD_BUCKET_MB", "0.00001")  # 10 bytes: a bucket per gradient
    text, step = _training_step_ir(tmp_path, [8, 6, 5, 4])
    assert len(step.grad_reducer._buckets) == 6
    lines = [ln.strip() for ln in text.split("return")[0].splitlines() if " = " in ln]
    starts = [i for i, ln in enumerate(lines) if "all_reduce_start(" in ln]
    waits = [i for i, ln in enumerate(lines) if "all_reduce_wait(" in ln]
    matmuls = [i for i, ln in enumerate(lines) if "matmul(" in ln]
    assert len(starts) == len(waits) == 6, text
    # the last layer's gradients exist before the first layer's: their bucket starts while
    # matmuls of the backward pass remain, and every start comes before every wait
    assert starts[0] < matmuls[-1], text
    assert max(starts) < min(waits), text


def test_without_overlap_a_compiled_step_sends_plain_all_reduces(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_GRAD_OVERLAP", "0")
    text, step = _training_step_ir(tmp_path, [4, 3, 2])
    assert not step.grad_reducer.overlap
    assert text.count("all_reduce(") == 1 and "all_reduce_start" not in text, text


@pytest.mark.parametrize("name,value", [("KILN_GRAD_OVERLAP", "yes"),
                                        ("KILN_GRAD_BUCKET_MB", "0"),
                                        ("KILN_GRAD_BUCKET_MB", "lots")])
def test_bad_overlap_settings_are_clear_errors(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=name):
        nn.DistributedGradReducer([ms.Parameter(ms.Tensor(X), name="w")])


@pytest.mark.parametrize("graph", [False, True])
def test_all_reduce_in_two_halves_on_one_rank(graph):
    from kiln.ops.operations.comm_ops import _AllReduceStart, _AllReduceWait

    def halves(x):
        handle = _AllReduceStart()(x)
        return _AllReduceWait()(x * 2, handle), handle

    fn = ms.jit(halves) if graph else halves
    out, handle = fn(ms.Tensor(X))
    np.testing.assert_array_equal(out.asnumpy(), X)  # the reduction of what was started
    assert handle.dtype == ms.int64 and handle.shape == ()
    with pytest.raises(ValueError, match="no started all-reduce"):
        _AllReduceWait()(ms.Tensor(X), handle)  # waited for already
    assert ms._C.comm_pending_count() == 0


def test_eager_buckets_start_during_the_backward_pass():
    ms.set_auto_parallel_context(parallel_mode=ms.ParallelMode.DATA_PARALLEL)
    net = nn.SequentialCell(nn.Dense(4, 3), nn.ReLU(), nn.Dense(3, 2))
    step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()),
                               nn.SGD(net.trainable_params(), 0.1))
    reducer = step.grad_reducer
    x, y = ms.Tensor(np.ones((2, 4), np.float32)), ms.Tensor(np.ones((2, 2), np.float32))
    step(x, y)
    assert reducer._eager.num_buckets == 1 and reducer._eager.started_early == 1
    # what the reducer is given is what it reduces, even when the step replaced the tensors the
    # sweep finished (the started bucket is sent again from the new ones)
    _, swept = step._grad_fn(x, y)
    grads = tuple(g * 3 for g in swept)
    out = reducer(grads)
    assert reducer._eager.started_early == 1
    for o, g in zip(out, grads):
        np.testing.assert_array_equal(o.asnumpy(), g.asnumpy())
    assert ms._C.comm_pending_count() == 0


def test_the_launchers_mpirun_line():
    import os

    from kiln.run import mpirun_command

    cmd = mpirun_command(2, "train.py", ["--epochs", "3"], timeout=5, python="py")
    assert cmd[1:5] == ["-n", "2", "--bind-to", "none"]
    assert "-x" in cmd and "KILN_COMM_TIMEOUT=5" in cmd
    assert cmd[-4:] == ["py", "train.py", "--epochs", "3"]
    assert ("--allow-run-as-root" in cmd) == (os.geteuid() == 0)
    many = mpirun_command(os.cpu_count() + 1, "t.py")
    assert "--oversubscribe" in many
    cluster = mpirun_command(64, "t.py", hostfile="hosts", log_dir="logs")
    assert "--oversubscribe" not in cluster
    assert cluster[cluster.index("--hostfile") + 1] == "hosts"
    assert cluster[cluster.index("--output-filename") + 1] == "logs"
    with pytest.raises(ValueError, match="positive"):
        mpirun_command(0, "t.py")
    with pytest.raises(ValueError, match="timeout"):
        mpirun_command(2, "t.py", timeout=0)


class _Halve(nn.Cell):
    def construct(self, grads):
        return tuple([g * 0.5 for g in grads])


@pytest.mark.parametrize("mode", [ms.PYNATIVE_MODE, ms.GRAPH_MODE])
def test_an_assigned_grad_reducer_is_used(mode):
    ms.set_context(mode=mode)
    x, y = ms.Tensor(np.ones((2, 3), np.float32)), ms.Tensor(np.zeros((2, 2), np.float32))

    def train(lr, reducer):
        ms.set_seed(5)
        net = nn.Dense(3, 2)
        step = nn.TrainOneStepCell(nn.WithLossCell(net, nn.MSELoss()),
                                   nn.SGD(net.trainable_params(), lr))
        if reducer is not None:
            step.grad_reducer = reducer  # MindSpore's idiom in TrainOneStepCell subclasses
        step(x, y)
        return [p.asnumpy() for p in net.trainable_params()]

    for a, b in zip(train(0.2, _Halve()), train(0.1, None)):
        np.testing.assert_allclose(a, b, rtol=1e-6)
