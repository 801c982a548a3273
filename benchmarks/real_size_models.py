"""ResNet-18 and a BERT-base-size encoder (and, to show how time and memory grow, the seed
network and the one-block encoder) written the same way in kiln, PyTorch and JAX, from one set of
NumPy weights, for bench_real_size.py (issue #16 point 3).

Each framework runs in its own process (for its peak memory), so the weights are not passed
around: every process draws them from the same seeded NumPy generator in the same order.
Names follow kiln's parameter names; the PyTorch and JAX builders read them from there.
"""
import math

import numpy as np

RESNET_STAGES = ((64, 1), (128, 2), (256, 2), (512, 2))  # (channels, first stride), 2 blocks each
# Transformer encoders: BERT-base's size, and the one-block encoder of bench_transformer.py.
ENCODERS = {"bert": {"d": 768, "heads": 12, "ff": 3072, "layers": 12, "seq": 128, "batch": 8},
            "encoder": {"d": 256, "heads": 4, "ff": 1024, "layers": 1, "seq": 128, "batch": 8}}
RESNET = {"batch": 16, "size": 224, "classes": 1000}
SEED = {"sizes": (784, 512, 512, 10), "batch": 64}  # the SPEC's seed network (an MLP)
MODELS = ("seed", "encoder", "resnet18", "bert")


def _resnet_blocks():
    """(prefix, in channels, out channels, stride) of the 8 basic blocks."""
    blocks, cin = [], 64
    for stage, (cout, stride) in enumerate(RESNET_STAGES, start=1):
        for index in range(2):
            blocks.append((f"layer{stage}.{index}", cin, cout, stride if index == 0 else 1))
            cin = cout
    return blocks


def resnet18_spec():
    """[(name, shape)] of every trained parameter, in a fixed order."""
    spec = [("conv1.weight", (64, 3, 7, 7)), ("bn1.gamma", (64,)), ("bn1.beta", (64,))]
    for prefix, cin, cout, stride in _resnet_blocks():
        spec += [(f"{prefix}.conv1.weight", (cout, cin, 3, 3)), (f"{prefix}.bn1.gamma", (cout,)),
                 (f"{prefix}.bn1.beta", (cout,)), (f"{prefix}.conv2.weight", (cout, cout, 3, 3)),
                 (f"{prefix}.bn2.gamma", (cout,)), (f"{prefix}.bn2.beta", (cout,))]
        if stride != 1 or cin != cout:
            spec += [(f"{prefix}.down.0.weight", (cout, cin, 1, 1)),
                     (f"{prefix}.down.1.gamma", (cout,)), (f"{prefix}.down.1.beta", (cout,))]
    return spec + [("fc.weight", (RESNET["classes"], 512)), ("fc.bias", (RESNET["classes"],))]


def encoder_spec(cfg):
    d, ff = cfg["d"], cfg["ff"]
    spec = []
    for layer in range(cfg["layers"]):
        p = f"layers.{layer}"
        for norm in ("ln1", "ln2"):
            spec += [(f"{p}.{norm}.gamma", (d,)), (f"{p}.{norm}.beta", (d,))]
        for name, i, o in (("q", d, d), ("k", d, d), ("v", d, d), ("proj", d, d),
                           ("fc1", d, ff), ("fc2", ff, d)):
            spec += [(f"{p}.{name}.weight", (o, i)), (f"{p}.{name}.bias", (o,))]
    return spec


def seed_spec():
    sizes = SEED["sizes"]
    spec = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:])):
        spec += [(f"layers.{2 * i}.weight", (fan_out, fan_in)),
                 (f"layers.{2 * i}.bias", (fan_out,))]
    return spec


def spec_of(model):
    """[(name, shape)] of a model's trained parameters."""
    if model == "resnet18":
        return resnet18_spec()
    return seed_spec() if model == "seed" else encoder_spec(ENCODERS[model])


def make_weights(model):
    """{name: float32 array}: He-scaled normals for convolutions and dense layers, BERT's
    N(0, 0.02) for the encoders' dense layers, ones/zeros for norms' gamma/beta and biases."""
    rng = np.random.default_rng(0)
    out = {}
    for name, shape in spec_of(model):
        if name.endswith("gamma"):
            out[name] = np.ones(shape, np.float32)
        elif name.endswith(("beta", "bias")):
            out[name] = np.zeros(shape, np.float32)
        else:
            std = 0.02 if model in ENCODERS else math.sqrt(2.0 / np.prod(shape[1:]))
            out[name] = (rng.standard_normal(shape) * std).astype(np.float32)
    return out


def make_inputs(model):
    """(x, y) for a model: images and class labels, or token features and a regression target."""
    rng = np.random.default_rng(1)
    if model == "resnet18":
        b, s = RESNET["batch"], RESNET["size"]
        x = rng.standard_normal((b, 3, s, s)).astype(np.float32)
        return x, rng.integers(0, RESNET["classes"], b).astype(np.int32)
    if model == "seed":
        x = rng.standard_normal((SEED["batch"], SEED["sizes"][0])).astype(np.float32)
        return x, rng.integers(0, SEED["sizes"][-1], SEED["batch"]).astype(np.int32)
    cfg = ENCODERS[model]
    shape = (cfg["batch"], cfg["seq"], cfg["d"])
    return rng.standard_normal(shape).astype(np.float32), \
        rng.standard_normal(shape).astype(np.float32)


# ---- kiln (the MindSpore API) ----

def kiln_model(ms, model, weights):
    """The kiln Cell and its loss, weights loaded by name."""
    nn = ms.nn
    if model in ENCODERS:
        net, loss = _kiln_encoder(ms, ENCODERS[model]), nn.MSELoss()
    else:
        net = _kiln_resnet(ms) if model == "resnet18" else _kiln_seed(ms)
        loss = nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean")
    params = dict(net.parameters_and_names())
    for name, value in weights.items():
        params[name].set_data(ms.Tensor(value))
    return net, loss


def _kiln_resnet(ms):
    nn, ops = ms.nn, ms.ops

    def conv(cin, cout, k, stride):
        return nn.Conv2d(cin, cout, k, stride=stride, pad_mode="pad", padding=k // 2,
                         has_bias=False)

    class Block(nn.Cell):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1, self.bn1 = conv(cin, cout, 3, stride), nn.BatchNorm2d(cout)
            self.conv2, self.bn2 = conv(cout, cout, 3, 1), nn.BatchNorm2d(cout)
            self.relu = nn.ReLU()
            self.has_down = stride != 1 or cin != cout
            if self.has_down:
                self.down = nn.SequentialCell([conv(cin, cout, 1, stride), nn.BatchNorm2d(cout)])

        def construct(self, x):
            out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
            return self.relu(out + (self.down(x) if self.has_down else x))

    class ResNet18(nn.Cell):
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1, self.relu = conv(3, 64, 7, 2), nn.BatchNorm2d(64), nn.ReLU()
            self.pool = nn.MaxPool2d(3, 2, pad_mode="pad", padding=1)
            # Each stage is assigned whole: cells appended to an already assigned SequentialCell
            # get no prefix (in MindSpore too), and the stages' names would collide.
            stages = {}
            for prefix, cin, cout, stride in _resnet_blocks():
                stages.setdefault(prefix.split(".")[0], []).append(Block(cin, cout, stride))
            for stage, blocks in stages.items():
                setattr(self, stage, nn.SequentialCell(blocks))
            self.fc = nn.Dense(512, RESNET["classes"])

        def construct(self, x):
            x = self.pool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(ops.mean(x, (2, 3)))

    return ResNet18()


def _kiln_seed(ms):
    nn = ms.nn
    sizes, layers = SEED["sizes"], []
    for fan_in, fan_out in zip(sizes, sizes[1:]):
        layers += [nn.Dense(fan_in, fan_out), nn.ReLU()]

    class Seed(nn.Cell):
        def __init__(self):
            super().__init__()
            self.layers = nn.SequentialCell(layers[:-1])

        def construct(self, x):
            return self.layers(x)

    return Seed()


def _kiln_encoder(ms, cfg):
    nn, ops = ms.nn, ms.ops
    d, heads, ff = cfg["d"], cfg["heads"], cfg["ff"]

    class Layer(nn.Cell):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm((d,), epsilon=1e-5)
            self.ln2 = nn.LayerNorm((d,), epsilon=1e-5)
            self.q, self.k, self.v, self.proj = (nn.Dense(d, d) for _ in range(4))
            self.fc1, self.fc2 = nn.Dense(d, ff), nn.Dense(ff, d)
            self.scale = 1.0 / math.sqrt(d // heads)

        def construct(self, x):
            b, s, _ = x.shape
            h = self.ln1(x)
            split = (b, s, heads, d // heads)
            q = ops.transpose(ops.reshape(self.q(h), split), (0, 2, 1, 3))
            k = ops.transpose(ops.reshape(self.k(h), split), (0, 2, 3, 1))
            v = ops.transpose(ops.reshape(self.v(h), split), (0, 2, 1, 3))
            p = ops.softmax(ops.matmul(q, k) * self.scale, -1)
            o = ops.reshape(ops.transpose(ops.matmul(p, v), (0, 2, 1, 3)), (b, s, d))
            x = x + self.proj(o)
            return x + self.fc2(ops.gelu(self.fc1(self.ln2(x)), approximate="none"))

    class Encoder(nn.Cell):
        def __init__(self):
            super().__init__()
            self.layers = nn.SequentialCell([Layer() for _ in range(cfg["layers"])])

        def construct(self, x):
            return self.layers(x)

    return Encoder()


# ---- PyTorch ----

def torch_model(torch, model, weights):
    """The torch Module (same structure) and its loss, weights copied by kiln name."""
    nn, F = torch.nn, torch.nn.functional
    if model in ENCODERS:
        net = _torch_encoder(torch, ENCODERS[model])
    else:
        net = _torch_resnet(torch) if model == "resnet18" else _torch_seed(torch)
    params = dict(net.named_parameters())
    with torch.no_grad():
        for name, value in weights.items():
            torch_name = name.replace(".gamma", ".weight").replace(".beta", ".bias")
            params[torch_name].copy_(torch.from_numpy(value))
    if model in ENCODERS:
        return net, nn.MSELoss()
    return net, lambda logits, y: F.cross_entropy(logits, y.long())


def _torch_resnet(torch):
    nn = torch.nn

    def conv(cin, cout, k, stride):
        return nn.Conv2d(cin, cout, k, stride, k // 2, bias=False)

    class Block(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.conv1, self.bn1 = conv(cin, cout, 3, stride), nn.BatchNorm2d(cout)
            self.conv2, self.bn2 = conv(cout, cout, 3, 1), nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(conv(cin, cout, 1, stride), nn.BatchNorm2d(cout))

        def forward(self, x):
            out = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
            return torch.relu(out + (x if self.down is None else self.down(x)))

    class ResNet18(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1, self.bn1 = conv(3, 64, 7, 2), nn.BatchNorm2d(64)
            self.pool = nn.MaxPool2d(3, 2, 1)
            for prefix, cin, cout, stride in _resnet_blocks():
                stage = prefix.split(".")[0]
                if not hasattr(self, stage):
                    setattr(self, stage, nn.Sequential())
                getattr(self, stage).append(Block(cin, cout, stride))
            self.fc = nn.Linear(512, RESNET["classes"])

        def forward(self, x):
            x = self.pool(torch.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(x.mean((2, 3)))

    return ResNet18()


def _torch_seed(torch):
    nn, sizes, layers = torch.nn, SEED["sizes"], []
    for fan_in, fan_out in zip(sizes, sizes[1:]):
        layers += [nn.Linear(fan_in, fan_out), nn.ReLU()]

    class Seed(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.Sequential(*layers[:-1])

        def forward(self, x):
            return self.layers(x)

    return Seed()


def _torch_encoder(torch, cfg):
    nn, F = torch.nn, torch.nn.functional
    d, heads, ff = cfg["d"], cfg["heads"], cfg["ff"]

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-5), nn.LayerNorm(d, eps=1e-5)
            self.q, self.k, self.v, self.proj = (nn.Linear(d, d) for _ in range(4))
            self.fc1, self.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)

        def forward(self, x):
            b, s, _ = x.shape
            h = self.ln1(x)
            q = self.q(h).reshape(b, s, heads, d // heads).permute(0, 2, 1, 3)
            k = self.k(h).reshape(b, s, heads, d // heads).permute(0, 2, 3, 1)
            v = self.v(h).reshape(b, s, heads, d // heads).permute(0, 2, 1, 3)
            p = torch.softmax(torch.matmul(q, k) * (1.0 / math.sqrt(d // heads)), -1)
            o = torch.matmul(p, v).permute(0, 2, 1, 3).reshape(b, s, d)
            x = x + self.proj(o)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.Sequential(*[Layer() for _ in range(cfg["layers"])])

        def forward(self, x):
            return self.layers(x)

    return Encoder()


# ---- JAX (functional: the parameters are the weights dict itself) ----

def jax_model(jax, model):
    """(forward(params, x, train), loss(params, x, y)) in JAX. BatchNorm uses batch statistics
    when training and the initial running statistics (mean 0, variance 1) otherwise; unlike kiln
    and PyTorch it does not update running statistics (a functional step would return them)."""
    jnp = jax.numpy
    if model in ENCODERS:
        forward = _jax_encoder(jax, ENCODERS[model])
    else:
        forward = _jax_resnet(jax) if model == "resnet18" else _jax_seed(jax)

    def loss(params, x, y):
        out = forward(params, x, True)
        if model in ENCODERS:
            return jnp.mean((out - y) ** 2)
        logp = jax.nn.log_softmax(out, -1)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None].astype(jnp.int32), 1))

    return forward, loss


def _jax_resnet(jax):
    jnp, lax = jax.numpy, jax.lax

    def conv(p, x, stride):
        w = p
        pad = w.shape[-1] // 2
        return lax.conv_general_dilated(x, w, (stride, stride), [(pad, pad), (pad, pad)],
                                        dimension_numbers=("NCHW", "OIHW", "NCHW"))

    def bn(params, name, x, train):
        gamma = params[name + ".gamma"][None, :, None, None]
        beta = params[name + ".beta"][None, :, None, None]
        if train:
            mean = x.mean((0, 2, 3), keepdims=True)
            var = x.var((0, 2, 3), keepdims=True)
        else:
            mean, var = 0.0, 1.0
        return (x - mean) / jnp.sqrt(var + 1e-5) * gamma + beta

    def forward(params, x, train):
        relu = jax.nn.relu
        x = relu(bn(params, "bn1", conv(params["conv1.weight"], x, 2), train))
        x = lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 3, 3), (1, 1, 2, 2),
                              [(0, 0), (0, 0), (1, 1), (1, 1)])
        for prefix, cin, cout, stride in _resnet_blocks():
            out = relu(bn(params, prefix + ".bn1",
                          conv(params[prefix + ".conv1.weight"], x, stride), train))
            out = bn(params, prefix + ".bn2", conv(params[prefix + ".conv2.weight"], out, 1),
                     train)
            if stride != 1 or cin != cout:
                x = bn(params, prefix + ".down.1",
                       conv(params[prefix + ".down.0.weight"], x, stride), train)
            x = relu(out + x)
        return x.mean((2, 3)) @ params["fc.weight"].T + params["fc.bias"]

    return forward


def _jax_seed(jax):
    count = len(SEED["sizes"]) - 1

    def forward(params, x, train):
        for i in range(count):
            x = x @ params[f"layers.{2 * i}.weight"].T + params[f"layers.{2 * i}.bias"]
            x = jax.nn.relu(x) if i < count - 1 else x
        return x

    return forward


def _jax_encoder(jax, cfg):
    jnp = jax.numpy
    d, heads = cfg["d"], cfg["heads"]

    def dense(params, name, x):
        return x @ params[name + ".weight"].T + params[name + ".bias"]

    def layer_norm(params, name, x):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / jnp.sqrt(var + 1e-5) * params[name + ".gamma"] + params[name + ".beta"]

    def forward(params, x, train):
        b, s, _ = x.shape
        for layer in range(cfg["layers"]):
            p = f"layers.{layer}."
            h = layer_norm(params, p + "ln1", x)
            q = dense(params, p + "q", h).reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)
            k = dense(params, p + "k", h).reshape(b, s, heads, d // heads).transpose(0, 2, 3, 1)
            v = dense(params, p + "v", h).reshape(b, s, heads, d // heads).transpose(0, 2, 1, 3)
            attn = jax.nn.softmax((q @ k) * (1.0 / math.sqrt(d // heads)), -1)
            o = (attn @ v).transpose(0, 2, 1, 3).reshape(b, s, d)
            x = x + dense(params, p + "proj", o)
            h = jax.nn.gelu(dense(params, p + "fc1", layer_norm(params, p + "ln2", x)),
                            approximate=False)
            x = x + dense(params, p + "fc2", h)
        return x

    return forward


def flops(model):
    """(forward, training step) FLOPs of the products (2 per multiply-add; backward = 2x)."""
    if model == "resnet18":
        total, size = 0, RESNET["size"] // 2  # after the stride-2 stem
        total += 2 * 64 * 3 * 49 * size * size
        size //= 2  # max pool
        for _, cin, cout, stride in _resnet_blocks():
            size //= stride
            total += 2 * cout * cin * 9 * size * size + 2 * cout * cout * 9 * size * size
            if stride != 1 or cin != cout:
                total += 2 * cout * cin * size * size
        total = RESNET["batch"] * (total + 2 * 512 * RESNET["classes"])
    elif model == "seed":
        sizes = SEED["sizes"]
        total = SEED["batch"] * sum(2 * i * o for i, o in zip(sizes, sizes[1:]))
    else:
        cfg = ENCODERS[model]
        d, ff, s, b = cfg["d"], cfg["ff"], cfg["seq"], cfg["batch"]
        per_layer = 2 * b * s * (4 * d * d + 2 * d * ff) + 2 * 2 * b * s * s * d
        total = cfg["layers"] * per_layer
    return total, 3 * total
