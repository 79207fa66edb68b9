#!/usr/bin/python3
"""Writes the seed corpora of the image, calibration-cache, COCO JSON and precision-config fuzz targets
(tests/fuzz/corpus/{image,calib_cache,coco,precision_config}). Every seed is small (a fuzzer mutates small inputs
faster) and covers one of the forms qdeploy accepts: baseline, progressive, grayscale and CMYK JPEGs; RGB, gray,
palette, 16-bit, alpha and interlaced PNGs; caches with names that hold ':' and CRLF line ends; COCO instances and
results files (and pairs of them joined by a NUL byte, which coco_harness.h evaluates); precision configs as
`qdeploy qat2ptq` writes them.

Run with Debian's python (it has PIL and numpy):  /usr/bin/python3 tests/fuzz/make_parser_seeds.py
"""
import io
import json
import os
import shutil

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")


def fresh(name):
    d = os.path.join(CORPUS, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def write(d, name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def image_seeds():
    d = fresh("image")
    rng = np.random.default_rng(0)
    rgb = Image.fromarray(rng.integers(0, 256, (6, 7, 3), dtype=np.uint8), "RGB")
    gray = rgb.convert("L")

    def save(img, fmt, **kw):
        b = io.BytesIO()
        img.save(b, fmt, **kw)
        return b.getvalue()

    write(d, "rgb_baseline.jpg", save(rgb, "JPEG", quality=80))
    write(d, "rgb_444.jpg", save(rgb, "JPEG", quality=90, subsampling=0))
    write(d, "rgb_progressive.jpg", save(rgb, "JPEG", quality=80, progressive=True))
    write(d, "gray.jpg", save(gray, "JPEG", quality=80))
    write(d, "cmyk.jpg", save(rgb.convert("CMYK"), "JPEG", quality=80))
    write(d, "rgb_restart.jpg", save(Image.fromarray(rng.integers(0, 256, (16, 24, 3), dtype=np.uint8), "RGB"),
                                      "JPEG", quality=70, restart_marker_blocks=1))
    write(d, "rgb.png", save(rgb, "PNG"))
    write(d, "gray.png", save(gray, "PNG"))
    write(d, "gray_1bit.png", save(gray.convert("1"), "PNG"))
    write(d, "palette.png", save(rgb.convert("P", palette=Image.ADAPTIVE, colors=4), "PNG"))
    pal_trns = rgb.convert("P", palette=Image.ADAPTIVE, colors=4)
    write(d, "palette_trns.png", save(pal_trns, "PNG", transparency=0))
    write(d, "rgba.png", save(rgb.convert("RGBA"), "PNG"))
    write(d, "gray16.png", save(Image.fromarray((rng.integers(0, 65536, (5, 4))).astype(np.uint16)), "PNG"))
    write(d, "la.png", save(gray.convert("LA"), "PNG"))
    write(d, "rgb_interlaced.png", save(rgb, "PNG", interlace=1))


def calib_cache_seeds():
    d = fresh("calib_cache")
    write(d, "minimal.cache", "TRT-8600-EntropyCalibration2\nimages: 3c010204\n")
    write(d, "colons.cache", "TRT-8501-MinMaxCalibration\nimages: 3c010204\n/model.0/conv/Conv_output_0: 3e2b4a77\n"
                             "onnx::Mul_12: 3d8f5c29\n")
    write(d, "crlf.cache", "TRT-7000-LegacyCalibration\r\nx: 3F800000\r\n\r\ny: 1\r\n")
    write(d, "header_only.cache", "TRT-8600-EntropyCalibration2\n")
    src = os.path.join(HERE, "..", "..", "models", "yolov5n_fmnist_det.cache")
    with open(src) as f:
        write(d, "yolov5n_head.cache", "".join(f.readlines()[:12]))


def coco_seeds():
    d = fresh("coco")
    gt = {
        "info": {"description": "seed"}, "licenses": [],
        "images": [{"id": 1, "width": 64, "height": 48, "file_name": "a.jpg"}, {"id": 2, "width": 32, "height": 32}],
        "annotations": [
            {"id": 1, "image_id": 1, "category_id": 1, "bbox": [4, 5, 20, 10], "area": 200, "iscrowd": 0},
            {"id": 2, "image_id": 1, "category_id": 2, "bbox": [30.5, 2, 8, 8], "iscrowd": False,
             "segmentation": [[30.5, 2, 38.5, 2, 38.5, 10]]},
            {"id": 3, "image_id": 2, "category_id": 1, "bbox": [0, 0, 32, 32], "area": 1024.0, "iscrowd": 1},
        ],
        "categories": [{"id": 1, "name": "shirt", "supercategory": "x"}, {"id": 2, "name": "bag"}],
    }
    dets = [
        {"image_id": 1, "category_id": 1, "bbox": [4.2, 5, 19, 10], "score": 0.9},
        {"image_id": 1, "category_id": 2, "bbox": [30, 2, 8.5, 8], "score": 0.75},
        {"image_id": 2, "category_id": 1, "bbox": [1, 1, 30, 30], "score": 0.5},
        {"image_id": 2, "category_id": 3, "bbox": [1, 1, 3, 3], "score": 1e-3},
    ]
    g = json.dumps(gt)
    r = json.dumps(dets)
    write(d, "instances.json", g)
    write(d, "results.json", r)
    write(d, "results_empty.json", "[]")
    write(d, "instances_empty.json", '{"images": [], "annotations": [], "categories": []}')
    write(d, "pair.json", g + "\0" + r)
    write(d, "pair_compact.json", json.dumps(gt, separators=(",", ":")) + "\0" + json.dumps(dets[:2]))


def precision_config_seeds():
    d = fresh("precision_config")
    write(d, "full.json", json.dumps({
        "int8_tensor_scales": {"images": 0.0078125, "/model.0/conv/Conv_output_0": 0.0123},
        "fp16_nodes": ["/model.24/Concat"], "fp32_nodes": ["/model.24/Sigmoid"],
        "weight_scales": {"model.0.conv.weight": [0.01, 0.02, 0.03]}}, indent=2))
    write(d, "scales_only.json", '{"int8_tensor_scales": {"x": 1.5e-3}}')
    write(d, "nodes_only.json", '{"fp16_nodes": [], "fp32_nodes": ["a", "b\\u00e9"]}')
    write(d, "empty.json", "{}")


if __name__ == "__main__":
    image_seeds()
    calib_cache_seeds()
    coco_seeds()
    precision_config_seeds()
