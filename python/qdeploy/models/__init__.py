"""Model definitions and a name -> constructor registry shared by the training, export and QAT commands."""

from .classifier import ModelBN, ModelGN
from .yolo import SCALES, YOLOv5

CLASSIFIERS = {"bn": ModelBN, "gn": ModelGN}


def is_classifier(name):
    return name in CLASSIFIERS


def build_model(name, nc=80):
    """'yolov5s' (v6/v7 form), 'yolov5s-v5.0' (Focus+SPP form), 'bn' / 'gn' (seed 004 classifiers)."""
    if name in CLASSIFIERS:
        return CLASSIFIERS[name](nc)
    version = "v6"
    if name.endswith("-v5.0"):
        name, version = name[: -len("-v5.0")], "v5"
    if name.startswith("yolov5") and name[len("yolov5"):] in SCALES:
        return YOLOv5(name[len("yolov5"):], nc, version)
    raise ValueError(f"unknown model {name!r}; expected yolov5{{n,s,m,l,x}}[-v5.0], bn or gn")


MODEL_NAMES = [f"yolov5{s}{v}" for v in ("", "-v5.0") for s in SCALES] + list(CLASSIFIERS)
