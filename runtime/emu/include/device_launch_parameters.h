// cuda-emu stand-in for CUDA's device_launch_parameters.h: the built-in variables.
#pragma once

#include "hg_emu_device.h"
