"""kiln.dataset's sources, samplers and operations against what NumPy computes."""
import numpy as np
import pytest

import kiln as ms
import kiln.dataset as ds


@pytest.fixture(autouse=True)
def _seeded():
    seed = ds.config._state["seed"]
    ds.config.set_seed(0)
    yield
    ds.config._state["seed"] = seed


def _col(dataset, i=0, **kw):
    return [np.asarray(r[i]).tolist()
            for r in dataset.create_tuple_iterator(output_numpy=True, num_epochs=1, **kw)]


def _seq(n, name="x"):
    return ds.NumpySlicesDataset(np.arange(n), [name], shuffle=False)


class RandomAccess:
    def __init__(self, n):
        self.data = np.arange(n * 2).reshape(n, 2)

    def __getitem__(self, i):
        return self.data[i], np.array(i % 3)

    def __len__(self):
        return len(self.data)


def test_generator_random_access_shuffles_by_default_and_keeps_every_row():
    data = ds.GeneratorDataset(RandomAccess(10), ["a", "b"])
    rows = _col(data)
    assert rows != [[2 * i, 2 * i + 1] for i in range(10)]
    assert sorted(rows) == [[2 * i, 2 * i + 1] for i in range(10)]
    assert data.get_dataset_size() == 10 and data.get_col_names() == ["a", "b"]
    ordered = ds.GeneratorDataset(RandomAccess(4), ["a", "b"], shuffle=False)
    assert _col(ordered, 1) == [0, 1, 2, 0]


class Iterable:
    def __iter__(self):
        return iter(range(5))


def test_generator_iterable_sources():
    data = ds.GeneratorDataset(Iterable(), ["x"])  # read in order, again each epoch
    assert _col(data) == [0, 1, 2, 3, 4]
    assert data.get_dataset_size() == 5  # counted by reading an epoch
    assert sorted(_col(ds.GeneratorDataset(range(5), ["x"]))) == [0, 1, 2, 3, 4]  # random access
    gen = ds.GeneratorDataset(lambda: ((i, i * 0.5) for i in range(3)), ["i", "f"],
                              num_samples=2)
    assert _col(gen, 1) == [0.0, 0.5]
    assert gen.output_types() == [np.dtype(np.int64), np.dtype(np.float64)]
    with pytest.raises(ValueError, match="random-access"):
        ds.GeneratorDataset(Iterable(), ["x"], shuffle=True)
    with pytest.raises(ValueError, match="column_names"):
        ds.GeneratorDataset(RandomAccess(3))
    with pytest.raises(NotImplementedError, match="schema"):
        ds.GeneratorDataset(RandomAccess(3), schema="schema.json")
    with pytest.raises(RuntimeError, match="2 columns, but column_names has 1"):
        _col(ds.GeneratorDataset(RandomAccess(3), ["a"]))


def test_column_types_cast():
    data = ds.GeneratorDataset(lambda: ((np.array([1.5, 2.5]),) for _ in range(2)), ["x"],
                               column_types=[np.float16])
    assert data.output_types() == [np.dtype(np.float16)]


def test_numpy_slices_forms():
    assert ds.NumpySlicesDataset([1, 2, 3]).get_col_names() == ["column_0"]
    d = ds.NumpySlicesDataset((np.zeros((4, 2)), np.arange(4)), ["a", "b"], shuffle=False)
    assert d.output_shapes() == [[2], []] and _col(d, 1) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="different lengths"):
        ds.NumpySlicesDataset((np.zeros(3), np.zeros(4)))


def test_samplers():
    n = 10
    seq = ds.NumpySlicesDataset(np.arange(n), ["x"], sampler=ds.SequentialSampler(2, 3))
    assert _col(seq) == [2, 3, 4]
    rows = _col(ds.NumpySlicesDataset(np.arange(n), ["x"], sampler=ds.RandomSampler()))
    assert sorted(rows) == list(range(n)) and rows != list(range(n))
    with_repl = _col(ds.NumpySlicesDataset(np.arange(n), ["x"],
                                           sampler=ds.RandomSampler(True, num_samples=30)))
    assert len(with_repl) == 30 and len(set(with_repl)) < 30
    subset = _col(ds.NumpySlicesDataset(np.arange(n), ["x"],
                                        sampler=ds.SubsetRandomSampler([1, 5, 7])))
    assert sorted(subset) == [1, 5, 7]
    assert _col(ds.NumpySlicesDataset(np.arange(n), ["x"], sampler=[4, 2])) == [4, 2]
    with pytest.raises(RuntimeError, match="out of range"):
        _col(ds.NumpySlicesDataset(np.arange(n), ["x"], sampler=ds.SubsetSampler([12])))
    with pytest.raises(RuntimeError, match="sampler cannot be given with shuffle"):
        ds.NumpySlicesDataset(np.arange(n), ["x"], sampler=ds.RandomSampler(), shuffle=True)


def test_user_sampler():
    class Evens(ds.Sampler):
        def __iter__(self):
            return iter(range(0, self.dataset_size, 2))

    assert _col(ds.NumpySlicesDataset(np.arange(7), ["x"], sampler=Evens())) == [0, 2, 4, 6]


@pytest.mark.parametrize("shuffle", [False, True])
def test_shards_are_disjoint_equal_and_cover_the_source(shuffle):
    shards = [_col(ds.NumpySlicesDataset(np.arange(10), ["x"], num_shards=3, shard_id=i,
                                         shuffle=shuffle)) for i in range(3)]
    assert [len(s) for s in shards] == [4, 4, 4]  # ceil(10 / 3), padded by wrapping
    assert set(sum(shards, [])) == set(range(10))
    sampler = ds.DistributedSampler(3, 1, shuffle=False)
    assert _col(ds.NumpySlicesDataset(np.arange(10), ["x"], sampler=sampler)) == [1, 4, 7, 0]
    with pytest.raises(ValueError):
        ds.DistributedSampler(2, 2)
    with pytest.raises(RuntimeError, match="together"):
        ds.NumpySlicesDataset(np.arange(4), ["x"], num_shards=2)


def test_map_columns_follow_mindspore_rules():
    d = ds.NumpySlicesDataset({"a": np.arange(3), "b": np.arange(3) * 10}, shuffle=False)
    same = d.map(lambda a: a + 1, input_columns="a", output_columns="c")
    assert same.get_col_names() == ["c", "b"] and _col(same) == [1, 2, 3]
    split = d.map(lambda b: (b, b * 2), input_columns=["b"], output_columns=["p", "q"])
    assert split.get_col_names() == ["p", "q", "a"] and _col(split, 1) == [0, 20, 40]
    chained = d.map([lambda a, b: a + b, lambda s: s * 2], input_columns=["a", "b"],
                    output_columns=["s"])
    assert chained.get_col_names() == ["s"] and _col(chained) == [0, 22, 44]
    with pytest.raises(ValueError, match="no column 'z'"):
        d.map(lambda z: z, input_columns="z")
    with pytest.raises(RuntimeError, match="outputs for the 1 output columns"):
        _col(d.map(lambda a: (a, a), input_columns="a"))


def test_batch_and_per_batch_map():
    d = _seq(7).map(lambda x: (x, x * np.ones(2)), output_columns=["x", "v"])
    b = d.batch(3)
    assert b.get_dataset_size() == 3 and b.output_shapes() == [[3], [3, 2]]
    assert _col(b) == [[0, 1, 2], [3, 4, 5], [6]]
    assert _col(d.batch(3, drop_remainder=True)) == [[0, 1, 2], [3, 4, 5]]
    assert d.batch(3, drop_remainder=True).get_dataset_size() == 2

    def add_epoch_and_batch(xs, info):
        return ([x + 100 * info.get_batch_num() for x in xs],)

    mapped = _seq(4).batch(2, per_batch_map=add_epoch_and_batch, input_columns=["x"])
    assert _col(mapped) == [[0, 1], [102, 103]]
    ragged = ds.GeneratorDataset(lambda: (np.arange(i) for i in range(1, 4)), ["x"])
    with pytest.raises(RuntimeError, match="different shapes"):
        _col(ragged.batch(3))


def test_padded_batch():
    ragged = ds.GeneratorDataset(lambda: (np.arange(1, i + 1) for i in range(1, 4)), ["x"])
    assert _col(ragged.padded_batch(3)) == [[[1, 0, 0], [1, 2, 0], [1, 2, 3]]]
    fixed = ragged.padded_batch(2, pad_info={"x": ([4], -1)})
    assert _col(fixed) == [[[1, -1, -1, -1], [1, 2, -1, -1]], [[1, 2, 3, -1]]]
    with pytest.raises(RuntimeError, match="does not fit the pad shape"):
        _col(ragged.padded_batch(3, pad_info={"x": ([2], 0)}))


def test_repeat_take_skip_and_their_order():
    d = _seq(5)
    assert _col(d.repeat(2)) == [0, 1, 2, 3, 4] * 2
    assert _col(d.take(2).repeat(2)) == [0, 1, 0, 1]
    assert _col(d.repeat(2).take(7)) == [0, 1, 2, 3, 4, 0, 1]
    assert _col(d.skip(3).repeat(2)) == [3, 4, 3, 4]
    assert _col(d.repeat(2).batch(3)) == [[0, 1, 2], [3, 4, 0], [1, 2, 3], [4]]
    assert _col(d.batch(3).repeat(2)) == [[0, 1, 2], [3, 4]] * 2
    assert d.repeat(3).get_dataset_size() == 15 and d.skip(7).get_dataset_size() == 0
    endless = ds.GeneratorDataset(lambda: ((i,) for i in iter(int, 1)), ["x"])
    assert _col(endless.take(3)) == [0, 0, 0]


def test_shuffle_filter_project_rename():
    d = _seq(20)
    shuffled = _col(d.shuffle(5))
    assert sorted(shuffled) == list(range(20)) and shuffled != list(range(20))
    with pytest.raises(ValueError):
        d.shuffle(1)
    odd = d.filter(lambda x: x % 2 == 1, num_parallel_workers=3)
    assert _col(odd) == list(range(1, 20, 2)) and odd.get_dataset_size() == 10
    two = ds.NumpySlicesDataset({"a": np.arange(3), "b": np.arange(3) + 5}, shuffle=False)
    assert _col(two.project(["b", "a"])) == [5, 6, 7]
    renamed = two.rename(["a"], ["z"])
    assert renamed.get_col_names() == ["z", "b"] and _col(renamed, 1) == [5, 6, 7]
    with pytest.raises(ValueError, match="no column"):
        two.project("c")


def test_zip_and_concat():
    a, b = _seq(3, "a"), _seq(5, "b").map(lambda b: b * 10)
    zipped = ds.zip((a, b))
    assert zipped.get_col_names() == ["a", "b"] and zipped.get_dataset_size() == 3
    assert _col(zipped, 1) == [0, 10, 20]
    with pytest.raises(ValueError, match="repeat a name"):
        a.zip(_seq(2, "a"))
    cat = a + _seq(2, "a")
    assert _col(cat) == [0, 1, 2, 0, 1] and cat.get_dataset_size() == 5
    assert _col(cat.repeat(2)) == [0, 1, 2, 0, 1] * 2
    with pytest.raises(ValueError, match="column names differ"):
        a.concat(b)


def test_split():
    d = ds.NumpySlicesDataset(np.arange(10), ["x"])
    train, test = d.split([0.8, 0.2])
    got_train, got_test = _col(train), _col(test)
    assert len(got_train) == 8 and len(got_test) == 2
    assert sorted(got_train + got_test) == list(range(10))
    first, second = _seq(6).split([4, 2], randomize=False)
    assert _col(first) == [0, 1, 2, 3] and _col(second) == [4, 5]
    with pytest.raises(ValueError, match="add up"):
        _seq(6).split([4, 4], randomize=False)
    with pytest.raises(RuntimeError, match="random-access source"):
        _seq(6).map(lambda x: x).split([3, 3])


def test_tuple_iterator_columns_and_dict_iterator():
    d = ds.NumpySlicesDataset({"a": np.arange(2), "b": np.arange(2) + 7}, shuffle=False)
    assert [r[0].tolist() for r in d.create_tuple_iterator(columns=["b"], output_numpy=True)] \
        == [7, 8]
    rows = list(d.create_dict_iterator(num_epochs=1, output_numpy=True))
    assert [r["b"].tolist() for r in rows] == [7, 8]


def test_a_batch_fused_into_its_tensor_source_matches_the_general_path():
    """NumpySlicesDataset(...).batch(n) is one C++ stage; the same rows through a map (which
    keeps the stages apart) must batch identically, epoch after epoch."""
    values = np.arange(22).reshape(11, 2)

    def epochs(fused, drop):
        data = ds.NumpySlicesDataset({"v": values, "i": np.arange(11)})  # shuffled, seeded
        if not fused:
            data = data.map(lambda v: v, input_columns="v")
        it = data.batch(4, drop_remainder=drop).repeat(2).create_tuple_iterator(
            num_epochs=2, output_numpy=True)
        return [[[c.tolist() for c in row] for row in it] for _ in range(2)]

    for drop in (False, True):
        fused, general = epochs(True, drop), epochs(False, drop)
        assert fused == general
        assert len(fused[0]) == (4 if drop else 6) and fused[0] != fused[1]
    batch = next(iter(ds.NumpySlicesDataset(values, ["v"], shuffle=False).batch(4)))
    np.testing.assert_array_equal(batch[0].asnumpy(), values[:4])


def test_rows_handed_out_are_copies_of_the_source_data():
    values = np.arange(6, dtype=np.float32).reshape(3, 2)
    data = ds.NumpySlicesDataset(values, ["v"], shuffle=False)
    for (row,) in data:
        row[0] = 100  # an in-place write to the row's tensor
    for (row,) in data.create_tuple_iterator(num_epochs=1, output_numpy=True):
        row += 100
    assert _col(data) == values.tolist()
    touched = data.map(lambda v: v.__iadd__(1))  # a map function changing its argument
    assert _col(touched) == (values + 1).tolist() and _col(data) == values.tolist()


def test_python_dict_columns_pass_through_map_batch_and_iterators():
    def gen():
        for i in range(4):
            yield {"powers": np.power(i, [1, 2]), "i": np.array(i)}, i

    data = ds.GeneratorDataset(gen, ["d", "n"])
    rows = list(data.create_dict_iterator(num_epochs=1))
    assert isinstance(rows[2]["d"], dict) and isinstance(rows[2]["d"]["powers"], ms.Tensor)
    assert rows[2]["d"]["powers"].asnumpy().tolist() == [2, 4]
    flat = data.map(lambda d: (d["powers"], d["i"]), input_columns="d",
                    output_columns=["p", "i"])
    assert flat.get_col_names() == ["p", "i", "n"] and _col(flat, 1) == [0, 1, 2, 3]
    batched = list(data.batch(2).create_tuple_iterator(num_epochs=1, output_numpy=True))
    assert batched[1][0]["powers"].tolist() == [[2, 4], [3, 9]] and batched[1][1].tolist() == [2, 3]


def test_pk_sampler():
    labels = np.array([2, 0, 1, 0, 2, 2, 1, 0])
    data = ds.NumpySlicesDataset({"x": np.arange(8), "label": labels},
                                 sampler=ds.PKSampler(2))
    rows = list(data.create_tuple_iterator(output_numpy=True, num_epochs=1))
    assert [int(r[1]) for r in rows] == [0, 0, 1, 1, 2, 2]
    assert [int(r[0]) for r in rows] == [1, 3, 2, 6, 0, 4]  # each class's first rows
    assert data.get_dataset_size() == 6
    three = ds.NumpySlicesDataset({"x": np.arange(8), "label": labels},
                                  sampler=ds.PKSampler(4, shuffle=True))
    got = [int(r[1]) for r in three.create_tuple_iterator(output_numpy=True, num_epochs=1)]
    assert sorted(got) == [0] * 4 + [1] * 4 + [2] * 4  # class 1 has 2 rows: repeated
    with pytest.raises(ValueError, match="no column 'y'"):
        ds.NumpySlicesDataset({"x": np.arange(3)}, sampler=ds.PKSampler(1, class_column="y")
                              ).get_dataset_size()
