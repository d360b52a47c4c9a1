// data/image.hpp — decoding JPEG/PNG files, the resize + centre crop of the folder packer and the
// letterbox of the detection packers.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hetrain::data {

struct Image {
  int height = 0, width = 0, channels = 0;
  std::vector<uint8_t> pixels;  // interleaved HWC, as decoders produce it
};

// channels 1 = grey, 3 = RGB. Throws hetrain::Error naming the file on corrupt or truncated input
// (libjpeg-turbo warnings such as "premature end of data" count as errors).
Image decode_jpeg(const std::string& path, int channels);
Image decode_png(const std::string& path, int channels);
Image decode_image(const std::string& path, int channels);  // by extension

// Shorter side → size (bilinear, pixel centres aligned), then the centre size×size crop, as CHW.
// An image already size×size is copied unchanged.
void resize_center_crop(const Image& in, int size, uint8_t* out_chw);

// Where letterbox() put the image: a point at pixel-edge coordinate (x, y) of the input lands at
// (x·scale_x + pad_x, y·scale_y + pad_y) of the output.
struct Placement {
  double scale_x = 1, scale_y = 1;
  int pad_x = 0, pad_y = 0;
};
// Where letterbox() puts a width × height image on a size × size canvas (a pure function of the sizes:
// hetrain eval --save-json maps detections back with it).
Placement letterbox_placement(int width, int height, int size);
// The whole image scaled by size / max(H, W) (bilinear, pixel centres aligned; the scaled sides rounded to
// whole pixels), centred on a size×size canvas of `fill`, as CHW. Boxes stay whole: nothing is cropped.
Placement letterbox(const Image& in, int size, uint8_t fill, uint8_t* out_chw);
// Bilinear resize of an HWC image to out_h × out_w (pixel centres aligned), HWC.
Image resize_bilinear(const Image& in, int out_h, int out_w);

}  // namespace hetrain::data
