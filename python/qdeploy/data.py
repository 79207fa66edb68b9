"""Datasets: COCO-format detection data and Fashion-MNIST for the classifiers.

Detection data is a folder with ``images/`` and one COCO instances JSON (``images``: id, file_name; ``annotations``:
image_id, category_id, bbox [x, y, w, h] in pixels). Category ids are mapped to contiguous class indices in sorted
order (ids 1..10 -> classes 0..9), the mapping the C++ evaluator must invert. A data root may instead hold ``train/``
and ``val/`` folders of that form. Samples are (uint8 image [3, S, S], labels [n, 5] = class, cx, cy, w, h
normalized to the letterboxed image, image id); ``collate`` prefixes each label row with its index in the batch.

Fashion-MNIST is read from the IDX files (as shipped, gzipped), 28x28 padded with zeros to 32x32 and replicated to
3 channels, scaled to [0, 1] and not normalized further: the exact input contract of the exported classifiers.
"""

import gzip
import json
import struct
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

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
    root/{images/, *.json} (a single-split root, preferring a JSON whose name says train). None if absent."""
    root = Path(root)
    candidates = [root / split] + ([root] if split == "train" else [])
    for base in candidates:
        jsons = sorted(base.glob("*.json")) if base.is_dir() else []
        if (base / "images").is_dir() and jsons:
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

    @property
    def num_classes(self):
        return len(self.cat_to_class)

    def __len__(self):
        return len(self.images)

    def _load(self, i):
        img = read_image(self.images_dir / self.images[i]["file_name"])
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
