"""Image-loading throughput: kiln.dataset against MindSpore's dataset and PyTorch's DataLoader.

The pipeline of issue #13: decode → random resized crop to 224 → horizontal flip → normalize →
HWC2CHW → batch 64, over a folder of JPEGs this script generates (default 2,000 256×256 RGB
images, quality 90), with the same number of workers on each side (default 2). Each framework
runs a warm-up epoch, then the timed epoch; the result is images per second of the timed one.

kiln and MindSpore run the very same code (kiln's API is MindSpore's); PyTorch runs a
torch.utils.data.Dataset that decodes with PIL and transforms with NumPy, in a DataLoader.

Run (not while the machine is busy):
  PYTHONPATH=build/dev/python python benchmarks/bench_dataset.py --framework kiln
  <MindSpore's venv>/bin/python benchmarks/bench_dataset.py --framework mindspore
  <PyTorch's venv>/bin/python benchmarks/bench_dataset.py --framework torch
--framework all tries every framework importable in this interpreter. The image folder is kept
in --dir (default: a folder under the system's temp dir) and reused by later runs.
"""
import argparse
import math
import os
import sys
import tempfile
import time

import numpy as np

MEAN = [0.485 * 255, 0.456 * 255, 0.406 * 255]
STD = [0.229 * 255, 0.224 * 255, 0.225 * 255]


def make_images(folder, count, size, seed=0):
    """`count` JPEGs (quality 90) of smooth random colour fields, in two class folders."""
    marker = os.path.join(folder, f".made-{count}-{size}")
    if os.path.exists(marker):
        return
    import cv2  # noqa: PLC0415 - kiln's own dependency; a peer's venv may lack it: make the
    # folder with kiln's interpreter first, then reuse it (--dir)
    rng = np.random.default_rng(seed)
    for cls in ("a", "b"):
        os.makedirs(os.path.join(folder, cls), exist_ok=True)
    for i in range(count):
        small = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)
        image = cv2.resize(small, (size, size), interpolation=cv2.INTER_CUBIC)
        path = os.path.join(folder, "ab"[i % 2], f"{i:05d}.jpg")
        cv2.imwrite(path, image, [cv2.IMWRITE_JPEG_QUALITY, 90])
    open(marker, "w").close()


def mindspore_style(ds, vision, folder, workers, batch):
    """The pipeline in MindSpore's API: kiln.dataset or mindspore.dataset."""
    data = ds.ImageFolderDataset(folder, shuffle=True, num_parallel_workers=workers)
    ops = [vision.Decode(), vision.RandomResizedCrop(224), vision.RandomHorizontalFlip(),
           vision.Normalize(MEAN, STD), vision.HWC2CHW()]
    data = data.map(ops, input_columns="image", num_parallel_workers=workers)
    return data.batch(batch, drop_remainder=False, num_parallel_workers=workers)


def time_epochs(make_iterator, epochs=2):
    """Seconds and images of the last of `epochs` epochs (the first ones warm up)."""
    result = None
    for _ in range(epochs):
        start, images = time.perf_counter(), 0
        for batch in make_iterator():
            images += len(batch[0])
        result = (time.perf_counter() - start, images)
    return result


def run_kiln(args):
    import kiln.dataset as ds  # noqa: PLC0415
    from kiln.dataset import vision  # noqa: PLC0415

    data = mindspore_style(ds, vision, args.dir, args.workers, args.batch)
    it = data.create_tuple_iterator(num_epochs=2, output_numpy=True)
    return time_epochs(lambda: it)


def run_mindspore(args):
    import mindspore.dataset as ds  # noqa: PLC0415
    from mindspore.dataset import vision  # noqa: PLC0415

    data = mindspore_style(ds, vision, args.dir, args.workers, args.batch)
    it = data.create_tuple_iterator(num_epochs=2, output_numpy=True)
    return time_epochs(lambda: it)


def _crop_box(rng, h, w, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    for _ in range(10):
        area = h * w * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(math.log(ratio[0]), math.log(ratio[1])))
        cw, ch = round(math.sqrt(area * aspect)), round(math.sqrt(area / aspect))
        if 0 < cw <= w and 0 < ch <= h:
            top, left = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
            return int(left), int(top), int(left + cw), int(top + ch)
    return 0, 0, w, h


def run_torch(args):
    import torch  # noqa: PLC0415
    from PIL import Image  # noqa: PLC0415

    files = sorted(os.path.join(root, f) for root, _, names in os.walk(args.dir)
                   for f in names if f.endswith(".jpg"))
    mean, std = np.array(MEAN, np.float32), np.array(STD, np.float32)

    class Folder(torch.utils.data.Dataset):
        def __len__(self):
            return len(files)

        def __getitem__(self, i):
            rng = np.random.default_rng()
            image = Image.open(files[i]).convert("RGB")
            image = image.crop(_crop_box(rng, image.height, image.width))
            array = np.asarray(image.resize((224, 224), Image.BILINEAR), dtype=np.float32)
            if rng.random() < 0.5:
                array = array[:, ::-1]
            array = (array - mean) / std
            return torch.from_numpy(np.ascontiguousarray(array.transpose(2, 0, 1))), i % 2

    loader = torch.utils.data.DataLoader(Folder(), batch_size=args.batch, shuffle=True,
                                         num_workers=args.workers, persistent_workers=True)
    return time_epochs(lambda: iter(loader))


RUNNERS = {"kiln": run_kiln, "mindspore": run_mindspore, "torch": run_torch}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=[*RUNNERS, "all"], default="all")
    parser.add_argument("--images", type=int, default=2000)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "kiln-bench-jpegs"))
    args = parser.parse_args(argv)
    make_images(args.dir, args.images, args.size)
    names = list(RUNNERS) if args.framework == "all" else [args.framework]
    for name in names:
        try:
            seconds, images = RUNNERS[name](args)
        except ImportError as exc:
            print(f"{name:10s} not available here ({exc})")
            continue
        print(f"{name:10s} {images / seconds:9.1f} images/s ({images} images in {seconds:.2f} s, "
              f"{args.workers} workers, batch {args.batch})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
