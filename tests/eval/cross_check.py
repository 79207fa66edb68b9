#!/usr/bin/env python3
"""Cross-checks `qdeploy eval` against coco_reference.py on many seeded random cases (a developer tool; ctest runs
the checked-in cases of tests/eval/data/ instead).

    /usr/bin/python3 tests/eval/cross_check.py --qdeploy build/qdeploy [--cases 200] [--seed 0]

Each case draws its own shape (images, categories, objects per image, detection noise, crowd rate, score rounding
that makes ties, id quirks) so that the rules are exercised in combination. Exits 1 at the first case whose 12
numbers or per-category APs differ in any bit, leaving its files in the temporary folder it prints.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coco_reference  # noqa: E402


def make_case(rng):
    n_img = int(rng.integers(1, 30))
    n_cat = int(rng.integers(1, 6))
    cats = sorted(rng.choice(np.arange(1, 100), size=n_cat, replace=False).tolist())
    imgs = rng.choice(np.arange(0, 10000), size=n_img, replace=False).tolist()
    decimals = int(rng.choice([1, 2, 3, 6]))  # coarse scores make ties
    crowd_rate = float(rng.choice([0, 0.05, 0.3]))
    noise = float(rng.uniform(0.02, 0.3))
    max_obj = int(rng.choice([3, 10, 60]))
    integer_boxes = rng.random() < 0.3
    gt = {'images': [{'id': i} for i in imgs], 'categories': [{'id': c} for c in cats], 'annotations': []}
    dets = []

    def box():
        w, h = np.exp(rng.uniform(np.log(2), np.log(400), size=2))
        b = [rng.uniform(0, 600), rng.uniform(0, 450), w, h]
        return [float(np.round(v)) if integer_boxes else float(np.round(v, 2)) for v in b]

    def score():
        return float(np.round(rng.random(), decimals))

    next_id = int(rng.integers(0, 2))  # sometimes an annotation id 0
    for img in imgs:
        for cat in cats:
            for _ in range(int(rng.integers(0, max_obj + 1))):
                b = box()
                area = b[2] * b[3] * (float(rng.uniform(0.4, 1.0)) if rng.random() < 0.7 else 1.0)
                gt['annotations'].append({'id': next_id, 'image_id': img, 'category_id': cat, 'bbox': b,
                                          'area': area, 'iscrowd': int(rng.random() < crowd_rate)})
                next_id += 1
                for _ in range(int(rng.choice([0, 1, 1, 1, 2, 3]))):
                    j = [b[0] + rng.normal(0, noise * b[2]), b[1] + rng.normal(0, noise * b[3]),
                         max(0.0, b[2] * (1 + rng.normal(0, noise))), max(0.0, b[3] * (1 + rng.normal(0, noise)))]
                    if integer_boxes:
                        j = [float(np.round(v)) for v in j]
                    dets.append({'image_id': img, 'category_id': cat, 'bbox': j, 'score': score()})
            for _ in range(int(rng.integers(0, max_obj + 1))):
                dets.append({'image_id': img, 'category_id': cat, 'bbox': box(), 'score': score()})
    rng.shuffle(dets)
    return gt, dets


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--qdeploy', required=True)
    ap.add_argument('--cases', type=int, default=200)
    ap.add_argument('--seed', type=int, default=0)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix='coco_cross_')
    n_dets = 0
    for i in range(args.cases):
        rng = np.random.default_rng([args.seed, i])
        gt, dets = make_case(rng)
        n_dets += len(dets)
        gt_path, dt_path = os.path.join(tmp, 'gt.json'), os.path.join(tmp, 'dets.json')
        with open(gt_path, 'w') as f:
            json.dump(gt, f)
        with open(dt_path, 'w') as f:
            json.dump(dets, f)
        precision, recall = coco_reference.evaluate(gt, dets)
        want = coco_reference.summarize(precision, recall)
        want_cat = coco_reference.per_category_ap(precision)
        out = subprocess.run([args.qdeploy, 'eval', '--annotations', gt_path, '--results', dt_path, '--json', '-q'],
                             capture_output=True, text=True)
        if out.returncode != 0:
            print('case %d: qdeploy failed: %s' % (i, out.stderr), file=sys.stderr)
            return 1
        got = json.loads(out.stdout)
        got_cat = [c['ap'] for c in got['per_category']]
        if got['stats_list'] != want or got_cat != want_cat:
            print('case %d differs (files in %s)\n  qdeploy:   %s\n  reference: %s' %
                  (i, tmp, got['stats_list'], want), file=sys.stderr)
            return 1
    print('%d cases (%d detections): all 12 numbers and per-category APs identical to the bit' % (args.cases, n_dets))
    return 0


if __name__ == '__main__':
    sys.exit(main())
