// See bench/peer_shim/ATen/ATen.h: the official DCNv4 kernels include this; they need nothing from it.
#pragma once
#include <ATen/ATen.h>
