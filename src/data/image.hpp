// data/image.hpp — decoding JPEG/PNG files and the resize + centre crop of the folder packer.
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

}  // namespace hetrain::data
