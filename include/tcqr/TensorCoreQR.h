// TensorCoreQR.h - umbrella header of tcqr; the only header users need. No CUDA header is included from here.
#ifndef TCQR_TENSORCOREQR_H
#define TCQR_TENSORCOREQR_H

#include <Eigen/Core>
#include <Eigen/QR>

#include "Backend.h"
#include "Error.h"
#include "TensorCoreHouseholderQ.h"
#include "TensorCoreHouseholderQR.h"
#include "TallSkinnyQR.h"

#endif  // TCQR_TENSORCOREQR_H
