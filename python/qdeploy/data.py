"""Datasets: COCO-format detection data and Fashion-MNIST for the classifiers.

Detection data is a folder with ``images/`` and one COCO instances JSON (``images``: id, file_name; ``annotations``:
image_id, category_id, bbox [x, y, w, h] in pixels). Category ids are mapped to contiguous class indices in sorted
order (ids 1..10 -> classes 0..9), the mapping the C++ evaluator must invert. A data root may instead hold ``train/``
and ``val/`` folders of that form, and the JSON may sit in ``annotations/`` beside ``images/`` (the layout that
``qdeploy dataset fmnist-det`` writes). ``cache_images`` decodes a dataset's images once into an ImageCache, a
memory-mapped file in RAM that all DataLoader workers share. Samples are (uint8 image [3, S, S], labels [n, 5] =
class, cx, cy, w, h normalized to the letterboxed image, image id); ``collate`` prefixes each label row with its index
in the batch.

Fashion-MNIST is read from the IDX files (as shipped, gzipped), 28x28 padded with zeros to 32x32 and replicated to
3 channels, scaled to [0, 1] and not normalized further: the exact input contract of the exported classifiers.
"""

import gzip
import hashlib
import json
import os
import shutil
import struct
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from . import augment

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"


def read_image(path):
    """Decode an image file to uint8 RGB [3, H, W] with PIL, or torchvision where PIL is missing."""
    try:
        from PIL import Image
    except ImportError:
        Image = None
    if Image is not None:
        with Image.open(path) as im:
            return torch.from_numpy(np.asarray(im.convert("RGB")).copy()).permute(2, 0, 1).contiguous()
    try:
        from torchvision.io import ImageReadMode, read_image as tv_read
    except ImportError as e:
        raise ImportError("decoding images needs PIL (apt-get install python3-pil) or torchvision") from e
    return tv_read(str(path), ImageReadMode.RGB)


def find_split(root, split):
    """(images dir, annotation JSON) of ``split``: root/split/{images/, *.json}, or for 'train' also
    root/{images/, *.json} (a single-split root), preferring a JSON whose name says the split. The JSON may also sit
    in an ``annotations/`` folder beside ``images/``, as ``qdeploy dataset fmnist-det`` writes it. None if absent."""
    root = Path(root)
    candidates = [root / split] + ([root] if split == "train" else [])
    for base in candidates:
        if not (base / "images").is_dir():
            continue
        jsons = sorted(base.glob("*.json")) + sorted((base / "annotations").glob("*.json"))
        if jsons:
            return base / "images", next((j for j in jsons if split in j.stem), jsons[0])
    return None


class CocoDetection(Dataset):
    """COCO-format detection dataset with letterbox and optional HSV jitter, flips and mosaic."""

    def __init__(self, images_dir, ann_file, imgsz=640, augment_=False, mosaic=0.0, hsv=True, flip=0.5, seed=0,
                 image_ids=None):
        self.images_dir = Path(images_dir)
        self.imgsz = imgsz
        self.augment = augment_
        self.mosaic, self.hsv, self.flip = mosaic, hsv, flip
        self.seed = seed
        self.epoch = 0
        with open(ann_file) as f:
            coco = json.load(f)
        cat_ids = {c["id"] for c in coco.get("categories", [])} | {a["category_id"] for a in coco["annotations"]}
        cat_ids = sorted(cat_ids)
        self.cat_to_class = {c: i for i, c in enumerate(cat_ids)}
        boxes = {}
        for a in coco["annotations"]:
            if a.get("iscrowd", 0):
                continue
            x, y, w, h = a["bbox"]
            if w > 0 and h > 0:
                boxes.setdefault(a["image_id"], []).append((self.cat_to_class[a["category_id"]], x, y, x + w, y + h))
        images = sorted(coco["images"], key=lambda im: im["id"])
        if image_ids is not None:
            wanted = set(image_ids)
            images = [im for im in images if im["id"] in wanted]
        self.images = images
        self.labels = [torch.tensor(boxes.get(im["id"], []), dtype=torch.float32).view(-1, 5) for im in images]
        self.cache = None  # an ImageCache of the decoded images, see cache_images()

    @property
    def num_classes(self):
        return len(self.cat_to_class)

    def __len__(self):
        return len(self.images)

    def image_path(self, i):
        return self.images_dir / self.images[i]["file_name"]

    def fingerprint(self):
        """Digest of the image list and the labels: tells whether a resumed run sees the data it was started on."""
        h = hashlib.sha1()
        for im, lab in zip(self.images, self.labels):
            h.update(f"{im['id']}:{im['file_name']}:".encode())
            h.update(lab.numpy().tobytes())
        return h.hexdigest()

    def _load(self, i):
        img = self.cache[i] if self.cache is not None else read_image(self.image_path(i))
        lab = self.labels[i]
        return img, lab[:, 1:].clone(), lab[:, 0].long()

    def _generator(self, i):
        """Per-sample, per-epoch randomness: reproducible, and different in each DataLoader worker."""
        return torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch * 100_003 + i)

    def __getitem__(self, i):
        gen = self._generator(i)
        s = self.imgsz
        if self.augment and torch.rand(1, generator=gen).item() < self.mosaic:
            others = torch.randint(len(self), (3,), generator=gen).tolist()
            img, boxes, classes = augment.mosaic([self._load(j) for j in [i] + others], s, gen)
        else:
            img, boxes, classes = self._load(i)
            img, r, (left, top) = augment.letterbox(img, s)
            boxes = boxes * r + torch.tensor([left, top, left, top], dtype=torch.float32)
        if self.augment:
            if self.hsv:
                img = augment.hsv_jitter(img, gen)
            if torch.rand(1, generator=gen).item() < self.flip:
                img, boxes = augment.hflip(img, boxes)
        xywh = torch.stack(((boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2,
                            boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]), 1) / s
        return img, torch.cat((classes.float().view(-1, 1), xywh), 1), self.images[i]["id"]


class ImageCache:
    """Decoded uint8 [3, H, W] images of a dataset, back to back in one flat file in RAM that is memory-mapped.

    The file is an anonymous memory file (memfd, reached by its /proc/PID/fd path) by default, else a file under
    /dev/shm or in the page cache of a temporary file, so every DataLoader worker reads the same pages: nothing is
    copied per worker, and workers do only the augmentation. Pickling keeps just the path and the layout, so workers
    started by spawn or forkserver reopen the file instead of receiving a copy. The mapping is copy-on-write: a stray
    in-place operation on a returned image never reaches the file. A memfd vanishes with the process that made it,
    even one that was killed; a named file is deleted by ``close()``.
    """

    def __init__(self, path, shapes, fd=None):
        self.path = str(path)
        self.shapes = np.asarray(shapes, dtype=np.int64).reshape(-1, 3)
        sizes = self.shapes.prod(1)
        self.offsets = np.concatenate(([0], np.cumsum(sizes)))
        self.nbytes = int(self.offsets[-1])
        self.fd, self.owner = fd, os.getpid()
        self._mm = None

    def __len__(self):
        return len(self.shapes)

    def _array(self, mode="c"):
        if self._mm is None:
            self._mm = np.memmap(self.path, dtype=np.uint8, mode=mode, shape=(self.nbytes,))
        return self._mm

    def view(self, i, mode="c"):
        c, h, w = (int(v) for v in self.shapes[i])
        return self._array(mode)[self.offsets[i]:self.offsets[i + 1]].reshape(c, h, w)

    def __getitem__(self, i):
        return torch.from_numpy(self.view(i))

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_mm"] = None
        return state

    @property
    def where(self):
        return "memory (memfd)" if self.fd is not None else str(Path(self.path).parent)

    def close(self):
        """Release the file (only in the process that made it; workers just drop their mapping)."""
        self._mm = None
        if os.getpid() != self.owner:
            return
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        else:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass


class _CacheFiller(Dataset):
    """Decodes chunks of a dataset's images straight into the cache file (one item = one chunk of indices)."""

    def __init__(self, cache, paths, chunk=16):
        self.cache, self.paths, self.chunk = cache, paths, chunk

    def __len__(self):
        return (len(self.paths) + self.chunk - 1) // self.chunk

    def __getitem__(self, k):
        idx = range(k * self.chunk, min((k + 1) * self.chunk, len(self.paths)))
        for i in idx:
            img = read_image(self.paths[i])
            dst = self.cache.view(i, mode="r+")
            if tuple(img.shape) != dst.shape:
                raise ValueError(f"{self.paths[i]}: decoded {tuple(img.shape)}, the annotations say {dst.shape}")
            dst[...] = img.numpy()  # a shared mapping: the bytes are in the file's pages for every reader at once
        return len(idx)


def _image_shape(path, meta):
    if meta.get("height") and meta.get("width"):
        return 3, int(meta["height"]), int(meta["width"])
    from PIL import Image

    with Image.open(path) as im:
        return 3, im.height, im.width


def cache_directory(nbytes, preferred=None):
    """Where a cache of ``nbytes`` fits: ``preferred``, else /dev/shm, else the temporary directory (whose page cache
    then holds it), each only with room to spare."""
    dirs = [preferred] if preferred else ["/dev/shm", tempfile.gettempdir()]
    for d in dirs:
        if d and os.path.isdir(d) and shutil.disk_usage(d).free > nbytes * 1.02 + (256 << 20):
            return d
    free = {d: shutil.disk_usage(d).free if d and os.path.isdir(d) else 0 for d in dirs}
    raise OSError(f"no room for an image cache of {nbytes / 2**30:.1f} GiB: free space {free}; "
                  "pass --cache-dir, or train without --cache-images")


def _memfd(nbytes, tag):
    """(path, fd) of an anonymous memory file of ``nbytes``, or None where this system has none."""
    if not hasattr(os, "memfd_create"):
        return None
    try:
        fd = os.memfd_create(f"qdeploy-cache-{tag}")
    except OSError:
        return None
    path = f"/proc/{os.getpid()}/fd/{fd}"
    try:
        os.ftruncate(fd, max(nbytes, 1))
        with open(path, "rb"):  # reopening by path is what spawned workers will do
            pass
    except OSError:
        os.close(fd)
        return None
    return path, fd


def cache_images(dataset, directory=None, workers=0, tag="data"):
    """Decode all images of ``dataset`` (a CocoDetection) once into an ImageCache, in ``workers`` processes, and attach
    it to the dataset. The cache is a memfd, or a file in ``directory`` when one is given (or memfd is missing).
    Returns the cache; ``cache.close()`` releases it."""
    paths = [dataset.image_path(i) for i in range(len(dataset))]
    shapes = [_image_shape(p, im) for p, im in zip(paths, dataset.images)]
    nbytes = ImageCache("", shapes).nbytes
    made = None if directory else _memfd(nbytes, tag)
    if made is not None:
        cache = ImageCache(made[0], shapes, fd=made[1])
    else:
        fd, path = tempfile.mkstemp(prefix=f"qdeploy-cache-{tag}-", suffix=".u8",
                                    dir=cache_directory(nbytes, directory))
        os.close(fd)
        cache = ImageCache(path, shapes)
    try:
        if made is None:
            os.truncate(cache.path, max(nbytes, 1))
        t0 = time.time()
        filler = _CacheFiller(cache, paths)
        done = sum(DataLoader(filler, batch_size=None, shuffle=False, num_workers=workers))
        assert done == len(paths)
        cache.elapsed = time.time() - t0
    except BaseException:
        cache.close()
        raise
    cache._mm = None  # reopened copy-on-write on first read
    dataset.cache = cache
    return cache


def collate(batch):
    """Stack images; labels become one [total, 6] tensor of (batch index, class, cx, cy, w, h)."""
    imgs, labels, ids = zip(*batch)
    rows = [torch.cat((torch.full((len(lab), 1), float(k)), lab), 1) for k, lab in enumerate(labels)]
    return torch.stack(imgs), torch.cat(rows), list(ids)


def detection_splits(root, imgsz, mosaic=1.0, val_fraction=0.05, seed=0):
    """(train, val) datasets from a data root; without a val split, a fixed ``val_fraction`` of images is held out."""
    train = find_split(root, "train")
    if train is None:
        raise FileNotFoundError(f"{root}: expected images/ and an instances JSON there, or train/ and val/ folders")
    val = find_split(root, "val")
    if val is not None:
        return (CocoDetection(*train, imgsz, augment_=True, mosaic=mosaic, seed=seed),
                CocoDetection(*val, imgsz))
    full = CocoDetection(*train, imgsz)
    ids = [im["id"] for im in full.images]
    perm = torch.randperm(len(ids), generator=torch.Generator().manual_seed(seed)).tolist()
    n_val = max(1, int(len(ids) * val_fraction)) if len(ids) > 1 else 0
    val_ids = {ids[k] for k in perm[:n_val]}
    return (CocoDetection(*train, imgsz, augment_=True, mosaic=mosaic, seed=seed,
                          image_ids=[x for x in ids if x not in val_ids]),
            CocoDetection(*train, imgsz, image_ids=sorted(val_ids)))


def read_idx(path):
    """Read an IDX file (gzipped or not): uint8 images [N, rows, cols] or labels [N]."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for an IDX header")
    magic, n = struct.unpack(">II", data[:8])
    if magic == 2049:
        shape, offset = (n,), 8
    elif magic == 2051:
        rows, cols = struct.unpack(">II", data[8:16])
        shape, offset = (n, rows, cols), 16
    else:
        raise ValueError(f"{path}: not an IDX uint8 file (magic {magic:#x})")
    count = 1
    for d in shape:
        count *= d
    if len(data) - offset != count:
        raise ValueError(f"{path}: header says {count} bytes of data, file has {len(data) - offset}")
    return torch.frombuffer(bytearray(data[offset:]), dtype=torch.uint8).view(shape)


def to_classifier_input(images):
    """uint8 [N, 28, 28] -> float [N, 3, 32, 32]: zero-pad 2 pixels each side, scale to [0, 1], three channels."""
    x = torch.nn.functional.pad(images.float() / 255, (2, 2, 2, 2))
    return x.unsqueeze(1).expand(-1, 3, -1, -1).contiguous()


def load_fashion_mnist(split="train", root=FASHION_MNIST_DIR):
    """(uint8 images [N, 28, 28], int64 labels [N]) of the 'train' or 'test' split."""
    prefix = "train" if split == "train" else "t10k"
    images = read_idx(Path(root) / f"{prefix}-images-idx3-ubyte.gz")
    labels = read_idx(Path(root) / f"{prefix}-labels-idx1-ubyte.gz").long()
    if images.dim() != 3 or labels.dim() != 1 or len(images) != len(labels):
        raise ValueError(f"{root}: {split} images {tuple(images.shape)} do not match labels {tuple(labels.shape)}")
    return images, labels


def augment_classifier_batch(x, gen=None):
    """Random horizontal flips and +-2 pixel shifts of a [N, 3, 32, 32] batch, on its own device. The zero border
    added by padding makes a circular roll an exact shift, so one gather does the whole batch."""
    n, _, h, w = x.shape
    flip = torch.rand(n, generator=gen) < 0.5
    shift = torch.randint(-2, 3, (n, 2), generator=gen)
    cols = (torch.arange(w).view(1, w) - shift[:, :1]) % w
    cols = torch.where(flip.view(n, 1), (w - 1 - cols), cols)
    rows = (torch.arange(h).view(1, h) - shift[:, 1:]) % h
    idx = (rows.view(n, h, 1) * w + cols.view(n, 1, w)).view(n, 1, h * w).expand(-1, x.shape[1], -1).to(x.device)
    return x.flatten(2).gather(2, idx).view_as(x)
