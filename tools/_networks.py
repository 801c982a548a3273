"""The networks the interop tools export: written once against an `nn` module, so the same
definition builds kiln's cells (kiln.nn) and MindSpore's (mindspore.nn)."""


def mlp_class(nn):
    """The seed network's layers (784 -> width -> width -> 10) as a Cell class on `nn`."""

    class Mlp(nn.Cell):
        def __init__(self, width=512):
            super().__init__()
            self.flatten = nn.Flatten()
            self.body = nn.SequentialCell(nn.Dense(28 * 28, width), nn.ReLU(),
                                          nn.Dense(width, width), nn.ReLU(), nn.Dense(width, 10))

        def construct(self, x):
            return self.body(self.flatten(x))

    return Mlp


def lenet_class(nn):
    """LeNet on 28x28 inputs as a Cell class on `nn`."""

    class LeNet(nn.Cell):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 6, 5, pad_mode="same", has_bias=True)
            self.conv2 = nn.Conv2d(6, 16, 5, pad_mode="valid", has_bias=True)
            self.relu = nn.ReLU()
            self.pool = nn.MaxPool2d(kernel_size=2, stride=2)
            self.flatten = nn.Flatten()
            self.fc1 = nn.Dense(400, 120)
            self.fc2 = nn.Dense(120, 84)
            self.fc3 = nn.Dense(84, 10)

        def construct(self, x):
            x = self.pool(self.relu(self.conv1(x)))
            x = self.pool(self.relu(self.conv2(x)))
            x = self.relu(self.fc1(self.flatten(x)))
            return self.fc3(self.relu(self.fc2(x)))

    return LeNet
