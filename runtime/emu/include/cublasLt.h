// cuda-emu stand-in for cuBLASLt (cublasLt.h): the handle lifecycle and version.
// Statuses are cuBLAS's (cublasStatus_t), as in the real library.
#pragma once

#include <cstddef>

#include "cublas_api.h"

struct cublasLtContext;
typedef struct cublasLtContext* cublasLtHandle_t;

cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle);
size_t cublasLtGetVersion(void);
