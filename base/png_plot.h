// Line charts and images as PNG files, encoded by libpng (deflate at level 9,
// no row filters: plots are flat colour). The chart draws its axes with
// numbered ticks and the axis titles in a built-in 5x7 bitmap font, so a
// loss curve or a Spearman-vs-alpha plot reads on its own.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"

namespace moeedb {

struct PlotSeries {
  std::vector<double> x, y;
  unsigned char r = 0, g = 0, b = 0;  // line colour
};

// The chart's words: axis titles and a title above the plot. The font has
// digits, lower-case letters, space and . , - + : ( ) / = ; other characters
// are drawn as spaces.
struct PlotLabels {
  std::string title, x, y;
};

// Axes span the data (y padded by 5 %), with 5 numbered ticks and light
// grid lines; a dot marks each series' maximum. The caller names the
// series' colours in its own output.
Status WriteLinePlotPng(const std::string& path, const std::vector<PlotSeries>& series, const PlotLabels& labels = {},
                        int width = 640, int height = 400);

// PNG bytes of an RGB image (row-major, 3 bytes per pixel); InvalidArgument
// for a size that does not match, Internal if libpng fails.
Result<std::string> EncodePng(const std::vector<unsigned char>& rgb, int width, int height);

}  // namespace moeedb
