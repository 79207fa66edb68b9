"""Tiny COCO-format detection data for tests: solid rectangles of 10 colours (one colour per category) on noise.

The real data comes from qdeploy's C++ scene generator; this stand-in only has to exercise the same file format.
"""

import json
from pathlib import Path

import numpy as np

COLOURS = [(230, 25, 75), (60, 180, 75), (255, 225, 25), (0, 130, 200), (245, 130, 48),
           (145, 30, 180), (70, 240, 240), (240, 50, 230), (210, 245, 60), (250, 190, 190)]


def write_dataset(root, n_images=4, size=128, seed=0, boxes_per_image=3):
    from PIL import Image

    rng = np.random.default_rng(seed)
    root = Path(root)
    (root / "images").mkdir(parents=True, exist_ok=True)
    images, annotations = [], []
    for i in range(n_images):
        img = rng.integers(0, 60, (size, size, 3), dtype=np.uint8)
        for _ in range(boxes_per_image):
            w, h = (int(v) for v in rng.integers(size // 8, size // 2, 2))
            x, y = int(rng.integers(0, size - w)), int(rng.integers(0, size - h))
            cat = int(rng.integers(1, 11))
            img[y:y + h, x:x + w] = COLOURS[cat - 1]
            annotations.append({"id": len(annotations) + 1, "image_id": i + 1, "category_id": cat,
                                "bbox": [x, y, w, h], "area": w * h, "iscrowd": 0})
        name = f"{i:06d}.jpg"
        Image.fromarray(img).save(root / "images" / name, quality=95)
        images.append({"id": i + 1, "file_name": name, "width": size, "height": size})
    categories = [{"id": c, "name": f"class{c}"} for c in range(1, 11)]
    with open(root / "instances.json", "w") as f:
        json.dump({"images": images, "annotations": annotations, "categories": categories}, f)
    return root


def dynamic_batch_copy(src, dst):
    """A copy of an ONNX model whose first input and output dims are symbolic ("N"): the shipped classifiers are
    exported with batch 1, and batch-agnostic inside (Conv, GlobalAveragePool, Flatten, Gemm)."""
    import onnx

    m = onnx.load(str(src))
    for v in list(m.graph.input[:1]) + list(m.graph.output[:1]):
        v.type.tensor_type.shape.dim[0].dim_param = "N"
    onnx.save(m, str(dst))
    return str(dst)
