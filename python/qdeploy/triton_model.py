"""Triton Python-backend model serving a qdeploy plan (``python3 -m qdeploy.triton`` copies this file into a model
repository as ``VERSION/model.py``).

Each model instance loads the plan on its own device (Triton's ``model_instance_device_id`` for KIND_GPU instances,
so an instance group over several GPUs gives one engine and one execution context per GPU) and runs the requests
Triton's dynamic batcher hands it as one batch: concatenated along the batch dim, run once, split back per request.
A request that cannot run gets an error response; the others still run.
"""

import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils

import qdeploy


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = config.get("parameters", {})
        plan_name = params.get("plan", {}).get("string_value", "model.plan")
        plan = os.path.join(args["model_repository"], str(args["model_version"]), plan_name)
        if args.get("model_instance_kind", "CPU") == "GPU":
            self.engine = qdeploy.load(plan, device_index=int(args.get("model_instance_device_id", 0)))
        else:
            self.engine = qdeploy.load(plan)
        self.context = self.engine.create_context()
        self.inputs = [i.name for i in self.engine.inputs]
        self.outputs = [o.name for o in self.engine.outputs]
        self.batching = int(config.get("max_batch_size", 0)) > 0

    def _inputs(self, request):
        arrays = {}
        for name in self.inputs:
            t = pb_utils.get_input_tensor_by_name(request, name)
            if t is None:
                raise qdeploy.InvalidArgumentError(f"the request has no input '{name}'")
            arrays[name] = t.as_numpy()
        return arrays

    def execute(self, requests):
        responses = [None] * len(requests)
        feeds = []
        for i, r in enumerate(requests):
            try:
                feeds.append((i, self._inputs(r)))
            except qdeploy.Error as e:
                responses[i] = pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(str(e)))
        if self.batching and len(feeds) > 1:
            groups = [feeds]  # one run for the whole dynamic batch
            first = feeds[0][1]
            if any(a.shape[1:] != first[n].shape[1:] or a.dtype != first[n].dtype
                   for _, f in feeds for n, a in f.items()):
                groups = [[f] for f in feeds]  # shapes differ beyond the batch: one run per request
        else:
            groups = [[f] for f in feeds]
        for group in groups:
            try:
                if len(group) == 1:
                    outs = [self.context.run(group[0][1])]
                else:
                    batch = {n: np.concatenate([f[n] for _, f in group]) for n in self.inputs}
                    out = self.context.run(batch)
                    sizes = np.cumsum([f[self.inputs[0]].shape[0] for _, f in group])[:-1]
                    split = {n: np.split(out[n], sizes) for n in self.outputs}
                    outs = [{n: split[n][k] for n in self.outputs} for k in range(len(group))]
                for (i, _), out in zip(group, outs):
                    tensors = [pb_utils.Tensor(n, np.ascontiguousarray(out[n])) for n in self.outputs]
                    responses[i] = pb_utils.InferenceResponse(output_tensors=tensors)
            except qdeploy.Error as e:
                for i, _ in group:
                    responses[i] = pb_utils.InferenceResponse(output_tensors=[], error=pb_utils.TritonError(str(e)))
        return responses

    def finalize(self):
        self.context = None
        self.engine = None
