#!/usr/bin/env python3
"""Writes the seeded random COCO cases of tests/eval/data/ and their expected numbers from coco_reference.py.

    /usr/bin/python3 tests/eval/make_coco_cases.py [OUT_DIR]      (default: tests/eval/data)

Each case NAME gives NAME_gt.json, NAME_dets.json and NAME_expected.json ({"stats": [12], "per_category_ap": [K]}).
coco_cases_test.cpp evaluates the first two with the C++ evaluator and compares with the third.
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coco_reference  # noqa: E402


def r2(x):
    return float(np.round(x, 2))


def jitter(rng, box, amount):
    x, y, w, h = box
    return [r2(x + rng.normal(0, amount * w)), r2(y + rng.normal(0, amount * h)),
            r2(max(1.0, w * (1 + rng.normal(0, amount)))), r2(max(1.0, h * (1 + rng.normal(0, amount))))]


class Builder:
    def __init__(self, cat_ids):
        self.gt = {'images': [], 'annotations': [], 'categories': [{'id': c, 'name': 'c%d' % c} for c in cat_ids]}
        self.dets = []
        self.next_ann = 1

    def image(self, img_id):
        self.gt['images'].append({'id': img_id, 'width': 640, 'height': 480, 'file_name': '%012d.jpg' % img_id})

    def ann(self, img, cat, box, area=None, crowd=0, ann_id=None):
        if ann_id is None:
            ann_id, self.next_ann = self.next_ann, self.next_ann + 1
        self.gt['annotations'].append({'id': ann_id, 'image_id': img, 'category_id': cat, 'bbox': box,
                                       'area': box[2] * box[3] if area is None else area, 'iscrowd': crowd})

    def det(self, img, cat, box, score):
        self.dets.append({'image_id': img, 'category_id': cat, 'bbox': box, 'score': score})


def random_box(rng):
    # log-uniform sides: a mix of small, medium and large objects
    w, h = np.exp(rng.uniform(np.log(4), np.log(300), size=2))
    return [r2(rng.uniform(0, 600)), r2(rng.uniform(0, 450)), r2(w), r2(h)]


def case_random(seed=1):
    """20 images, 3 categories: jittered true positives, duplicates, misses, false positives, crowd regions."""
    rng = np.random.default_rng(seed)
    cats = [1, 3, 7]
    b = Builder(cats)
    img_ids = rng.permutation(np.arange(1, 200))[:20].tolist()
    for img in img_ids:
        b.image(img)
        for cat in cats:
            for _ in range(rng.integers(0, 5)):
                box = random_box(rng)
                crowd = int(rng.random() < 0.1)
                b.ann(img, cat, box, area=r2(box[2] * box[3] * rng.uniform(0.5, 1.0)), crowd=crowd)
                if rng.random() < 0.8:
                    b.det(img, cat, jitter(rng, box, 0.1), float(np.round(rng.random(), 3)))
                if rng.random() < 0.2:  # duplicate
                    b.det(img, cat, jitter(rng, box, 0.15), float(np.round(rng.random(), 3)))
            for _ in range(rng.integers(0, 4)):  # false positives
                b.det(img, cat, random_box(rng), float(np.round(rng.random() * 0.6, 3)))
    rng.shuffle(b.dets)
    return b


def case_dense(seed=2):
    """More than 100 detections per image with tied scores: the maxDets cut and tie order across images."""
    rng = np.random.default_rng(seed)
    cats = [1, 2]
    b = Builder(cats)
    for img in [5, 3, 9, 1]:
        b.image(img)
        for _ in range(30):
            box = random_box(rng)
            b.ann(img, 1, box)
            for _ in range(rng.integers(1, 4)):
                b.det(img, 1, jitter(rng, box, 0.08), float(np.round(rng.random(), 1)))
        for _ in range(45):
            b.det(img, 1, random_box(rng), float(np.round(rng.random() * 0.8, 1)))
        for _ in range(3):
            box = random_box(rng)
            b.ann(img, 2, box)
            b.det(img, 2, jitter(rng, box, 0.05), 0.5)
    return b


def case_grid(seed=3):
    """IoUs exactly at thresholds (0.5, 0.55, 0.75, 0.9) and areas exactly at the small/medium/large limits."""
    rng = np.random.default_rng(seed)
    b = Builder([1])
    for img in range(1, 9):
        b.image(img)
        for j in range(6):
            x, y = 40 * j, 40 * (img % 5)
            b.ann(img, 1, [x, y, 20, 20], area=[1024, 9216, 400, 1023.5, 9216.5, 400][j])
            h = int(rng.choice([9, 10, 11, 12, 15, 16, 18, 19, 20]))  # IoU h/20 with the ground truth
            b.det(img, 1, [x, y, 20, h], float(np.round(rng.random(), 2)))
            if rng.random() < 0.5:  # a second, shifted detection: IoU (20-s)/(20+s)
                s = int(rng.integers(0, 8))
                b.det(img, 1, [x + s, y, 20, 20], float(np.round(rng.random(), 2)))
        b.det(img, 1, [300, 300, 32, 32], 0.3)  # area exactly 32^2, unmatched
        b.det(img, 1, [350, 350, 96, 96], 0.2)  # area exactly 96^2, unmatched
    return b


def case_ids(seed=4):
    """Odd ids: unsorted image ids, category ids with gaps, a category without ground truth, a crowd-only category,
    an annotation with id 0, detections of an unknown category (skipped), an image with detections only."""
    rng = np.random.default_rng(seed)
    cats = [40, 2, 11, 5]
    b = Builder(cats)
    for img in [907, 13, 500, 42, 77]:
        b.image(img)
    for img in [907, 13, 500, 42]:
        for cat in [2, 5]:
            for _ in range(3):
                box = random_box(rng)
                b.ann(img, cat, box, crowd=int(rng.random() < 0.15))
                b.det(img, cat, jitter(rng, box, 0.1), float(np.round(rng.random(), 3)))
        box = random_box(rng)
        b.ann(img, 11, box, crowd=1)
        b.det(img, 11, jitter(rng, box, 0.1), 0.9)
        b.det(img, 40, random_box(rng), 0.8)
        b.det(img, 99, random_box(rng), 0.95)
    b.gt['annotations'][3]['id'] = 0  # pycocotools reads a match to id 0 as no match
    for _ in range(5):
        b.det(77, 2, random_box(rng), float(np.round(rng.random(), 3)))
    return b


CASES = {'random': case_random, 'dense': case_dense, 'grid': case_grid, 'ids': case_ids}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), 'data')
    os.makedirs(out, exist_ok=True)
    for name, make in CASES.items():
        b = make()
        precision, recall = coco_reference.evaluate(b.gt, b.dets)
        expected = {'stats': coco_reference.summarize(precision, recall),
                    'per_category_ap': coco_reference.per_category_ap(precision)}
        for suffix, obj in (('gt', b.gt), ('dets', b.dets), ('expected', expected)):
            with open(os.path.join(out, '%s_%s.json' % (name, suffix)), 'w') as f:
                json.dump(obj, f, separators=(',', ':'))
                f.write('\n')
        print(name, ' '.join('%.4f' % s for s in expected['stats']))


if __name__ == '__main__':
    main()
