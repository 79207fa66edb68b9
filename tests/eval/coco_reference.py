#!/usr/bin/env python3
"""A small, independent re-implementation of pycocotools' COCOeval for bboxes (numpy only).

It is the oracle for qdeploy's C++ evaluator (src/eval/coco_eval.cpp) where pycocotools itself cannot be installed.
It follows pycocotools' rules (evaluate + accumulate + summarize):
  IoU thresholds np.linspace(.5, .95, 10), recall thresholds np.linspace(0, 1, 101), maxDets 1/10/100,
  area ranges all/small/medium/large on the annotation's 'area' (detections: w*h), crowd ground truth
  (IoU = intersection / detection area, may absorb any number of detections, which are then ignored),
  greedy matching in descending score order (stable), detections per image cut at maxDets, -1 for categories
  without non-ignored ground truth, precision envelope + searchsorted(side='left') interpolation, np.mean of the
  entries > -1.

Usage: coco_reference.py GT.json RESULTS.json    -> prints {"stats": [12 numbers], "per_category_ap": [...]}
"""
import json
import sys
from collections import defaultdict

import numpy as np

IOU_THRS = np.linspace(.5, 0.95, int(np.round((0.95 - .5) / .05)) + 1, endpoint=True)
REC_THRS = np.linspace(.0, 1.00, int(np.round((1.00 - .0) / .01)) + 1, endpoint=True)
MAX_DETS = [1, 10, 100]
AREA_RNGS = [[0 ** 2, 1e5 ** 2], [0 ** 2, 32 ** 2], [32 ** 2, 96 ** 2], [96 ** 2, 1e5 ** 2]]
AREA_LBLS = ['all', 'small', 'medium', 'large']


def iou_matrix(dt_boxes, gt_boxes, crowd):
    """[D, G] IoU of [x, y, w, h] boxes; for crowd ground truth the union is the detection's area."""
    d = np.asarray(dt_boxes, dtype=np.float64).reshape(-1, 4)
    g = np.asarray(gt_boxes, dtype=np.float64).reshape(-1, 4)
    w = np.minimum(d[:, None, 2] + d[:, None, 0], g[None, :, 2] + g[None, :, 0]) - np.maximum(d[:, None, 0], g[None, :, 0])
    h = np.minimum(d[:, None, 3] + d[:, None, 1], g[None, :, 3] + g[None, :, 1]) - np.maximum(d[:, None, 1], g[None, :, 1])
    inter = w * h
    da = (d[:, 2] * d[:, 3])[:, None]
    ga = (g[:, 2] * g[:, 3])[None, :]
    union = np.where(np.asarray(crowd, dtype=bool)[None, :], da, da + ga - inter)
    with np.errstate(divide='ignore', invalid='ignore'):
        iou = inter / union
    return np.where((w > 0) & (h > 0), iou, 0.0)


def match_image(gts, dts, lo, hi):
    """One image, one category, one area range -> (scores [D], matched [T, D], ignored [T, D], #non-ignored gt)."""
    gt_ign = np.array([bool(g.get('iscrowd', 0)) or g['area'] < lo or g['area'] > hi for g in gts], dtype=bool)
    order = np.argsort(gt_ign, kind='mergesort')  # regular ground truth first, ignored last
    gts = [gts[i] for i in order]
    gt_ign = gt_ign[order]
    crowd = np.array([bool(g.get('iscrowd', 0)) for g in gts], dtype=bool)
    ious = iou_matrix([d['bbox'] for d in dts], [g['bbox'] for g in gts], crowd)
    T = len(IOU_THRS)
    gt_of_dt = np.zeros((T, len(dts)), dtype=np.int64)  # matched ground-truth id, 0: none
    dt_ign = np.zeros((T, len(dts)), dtype=bool)
    for t, thr in enumerate(IOU_THRS):
        taken = np.zeros(len(gts), dtype=bool)
        for j in range(len(dts)):
            best, m = min(thr, 1 - 1e-10), -1
            for i in range(len(gts)):
                if taken[i] and not crowd[i]:
                    continue
                if m >= 0 and not gt_ign[m] and gt_ign[i]:
                    break
                if ious[j, i] >= best:
                    best, m = ious[j, i], i
            if m >= 0:
                taken[m] = True
                gt_of_dt[t, j] = gts[m]['id']
                dt_ign[t, j] = gt_ign[m]
    area = np.array([d['bbox'][2] * d['bbox'][3] for d in dts], dtype=np.float64)
    outside = (area < lo) | (area > hi)
    dt_ign |= (gt_of_dt == 0) & outside[None, :]
    return np.array([d['score'] for d in dts], dtype=np.float64), gt_of_dt != 0, dt_ign, int((~gt_ign).sum())


def evaluate(gt, results, img_ids=None):
    images = sorted({im['id'] for im in gt['images']}) if img_ids is None else sorted(set(img_ids))
    cats = sorted({c['id'] for c in gt['categories']})
    known_images = {im['id'] for im in gt['images']}
    for r in results:
        if r['image_id'] not in known_images:
            raise ValueError('result on an image the annotations do not list: %r' % r['image_id'])
    wanted_images, wanted_cats = set(images), set(cats)
    gts, dts = defaultdict(list), defaultdict(list)
    for a in gt['annotations']:
        if a['image_id'] in wanted_images and a['category_id'] in wanted_cats:
            gts[a['image_id'], a['category_id']].append(a)
    for r in results:
        if r['image_id'] in wanted_images and r['category_id'] in wanted_cats:
            dts[r['image_id'], r['category_id']].append(r)

    T, R, K, A, M = len(IOU_THRS), len(REC_THRS), len(cats), len(AREA_RNGS), len(MAX_DETS)
    precision = -np.ones((T, R, K, A, M))
    recall = -np.ones((T, K, A, M))
    for k, cat in enumerate(cats):
        for a, (lo, hi) in enumerate(AREA_RNGS):
            per_image, npig = [], 0
            for img in images:
                g, d = gts.get((img, cat), []), dts.get((img, cat), [])
                if not g and not d:
                    continue
                d = sorted(d, key=lambda x: -x['score'])[:MAX_DETS[-1]]  # Python's sort is stable
                scores, matched, ignored, n = match_image(g, d, lo, hi)
                per_image.append((scores, matched, ignored))
                npig += n
            if npig == 0:
                continue
            for m, max_det in enumerate(MAX_DETS):
                scores = np.concatenate([s[:max_det] for s, _, _ in per_image])
                order = np.argsort(-scores, kind='mergesort')
                matched = np.concatenate([x[:, :max_det] for _, x, _ in per_image], axis=1)[:, order]
                ignored = np.concatenate([x[:, :max_det] for _, _, x in per_image], axis=1)[:, order]
                tps = np.cumsum(matched & ~ignored, axis=1).astype(np.float64)
                fps = np.cumsum(~matched & ~ignored, axis=1).astype(np.float64)
                for t in range(T):
                    rc = tps[t] / npig
                    pr = tps[t] / (fps[t] + tps[t] + np.spacing(1))
                    recall[t, k, a, m] = rc[-1] if len(rc) else 0
                    if len(pr):
                        pr = np.maximum.accumulate(pr[::-1])[::-1]  # precision envelope
                    idx = np.searchsorted(rc, REC_THRS, side='left')
                    q = np.zeros(R)
                    ok = idx < len(pr)
                    q[ok] = pr[idx[ok]]
                    precision[t, :, k, a, m] = q
    return precision, recall


def mean_valid(s):
    s = s[s > -1]
    return -1.0 if s.size == 0 else float(np.mean(s))


def summarize(precision, recall):
    def one(ap, iou=None, area='all', max_det=100):
        a, m = AREA_LBLS.index(area), MAX_DETS.index(max_det)
        s = precision if ap else recall
        if iou is not None:
            s = s[np.where(IOU_THRS == iou)[0]]
        return mean_valid(s[:, :, :, a, m] if ap else s[:, :, a, m])

    return [one(True), one(True, .5), one(True, .75), one(True, area='small'), one(True, area='medium'),
            one(True, area='large'), one(False, max_det=1), one(False, max_det=10), one(False),
            one(False, area='small'), one(False, area='medium'), one(False, area='large')]


def per_category_ap(precision):
    return [mean_valid(precision[:, :, k, 0, -1]) for k in range(precision.shape[2])]


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        gt = json.load(f)
    with open(argv[2]) as f:
        results = json.load(f)
    precision, recall = evaluate(gt, results)
    print(json.dumps({'stats': summarize(precision, recall), 'per_category_ap': per_category_ap(precision)}))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
