#include "data/image.hpp"

#include <fcntl.h>
#include <png.h>
#include <sys/stat.h>
#include <turbojpeg.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "hetrain/error.hpp"

namespace hetrain::data {
std::string shown_name(const std::string& path) {
  for (const char ch : path)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7F) return quoted(path);
  return path;
}

std::vector<uint8_t> read_whole_file(const std::string& path) {
  const std::string name = shown_name(path);
  HT_CHECK(path.find('\0') == std::string::npos, name, ": the name holds a NUL byte (no such file can exist)");
  // O_NONBLOCK: opening a FIFO must not wait for a writer; only a regular file is read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  HT_CHECK(fd >= 0, name, ": cannot open: ", std::strerror(errno));
  struct stat st;
  const bool stated = ::fstat(fd, &st) == 0;
  if (!stated || !S_ISREG(st.st_mode)) {
    const int why = errno;
    ::close(fd);
    HT_CHECK(stated, name, ": cannot stat: ", std::strerror(why));
    HT_THROW(name, ": not a regular file (", S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a folder" : "a device or socket",
             "): only regular image files are read");
  }
  std::FILE* f = ::fdopen(fd, "rb");
  if (!f) ::close(fd);
  HT_CHECK(f, name, ": cannot open: ", std::strerror(errno));
  std::vector<unsigned char> buf;
  unsigned char tmp[1 << 16];
  size_t got;
  while ((got = std::fread(tmp, 1, sizeof tmp, f)) > 0) buf.insert(buf.end(), tmp, tmp + got);
  bool bad = std::ferror(f);
  std::fclose(f);
  HT_CHECK(!bad, name, ": read error");
  return buf;
}

namespace {
// One TurboJPEG handle per thread and direction, kept for the thread's life (decoders run on the reader's
// threads for every batch). A handle that reported an error is replaced: TurboJPEG 2.1 may leave it in a
// state where the next header reads as 0 x 0.
struct TjHandle {
  tjhandle h = nullptr;
  bool compress;
  explicit TjHandle(bool c) : compress(c) { reset(); }
  ~TjHandle() { tjDestroy(h); }
  void reset() {
    if (h) tjDestroy(h);
    h = compress ? tjInitCompress() : tjInitDecompress();
    HT_CHECK(h, "cannot initialise libturbojpeg");
  }
};
TjHandle& decompressor() {
  thread_local TjHandle handle(false);
  return handle;
}
TjHandle& compressor() {
  thread_local TjHandle handle(true);
  return handle;
}
// The handle's error text, after which the handle is replaced.
std::string error_of(TjHandle& handle) {
  const std::string why = tjGetErrorStr2(handle.h);
  handle.reset();
  return why;
}
}  // namespace

JpegHeader read_jpeg_header(const uint8_t* data, size_t size, const std::string& what) {
  HT_CHECK(size > 0, what, ": empty (corrupt JPEG)");
  TjHandle& h = decompressor();
  JpegHeader hdr;
  int subsamp = 0;
  if (tjDecompressHeader3(h.h, data, (unsigned long)size, &hdr.width, &hdr.height, &subsamp, &hdr.colorspace) != 0)
    HT_THROW(what, ": corrupt JPEG (header): ", error_of(h));
  if (hdr.width <= 0 || hdr.height <= 0) {
    h.reset();
    HT_THROW(what, ": corrupt JPEG (header): image size ", hdr.width, "x", hdr.height);
  }
  return hdr;
}

Image decode_jpeg_bytes(const uint8_t* data, size_t size, int channels, const std::string& what, int scaled_width,
                        int scaled_height) {
  HT_CHECK(channels == 1 || channels == 3, "channels must be 1 or 3, got ", channels);
  const JpegHeader hdr = read_jpeg_header(data, size, what);
  Image img;
  img.width = scaled_width > 0 ? scaled_width : hdr.width;
  img.height = scaled_height > 0 ? scaled_height : hdr.height;
  img.channels = channels;
  img.pixels.resize(size_t(img.width) * img.height * channels);
  TjHandle& h = decompressor();
  const int flags = TJFLAG_ACCURATEDCT | TJFLAG_STOPONWARNING;
  if (hdr.colorspace == TJCS_CMYK || hdr.colorspace == TJCS_YCCK) {
    // libjpeg-turbo decodes four-channel JPEGs only to CMYK (a few ImageNet training files are CMYK).
    // Photo editors write them with inverted ink values, so channel × K / 255 is the light each lets through.
    std::vector<uint8_t> cmyk(size_t(img.width) * img.height * 4);
    if (tjDecompress2(h.h, data, (unsigned long)size, cmyk.data(), img.width, 0, img.height, TJPF_CMYK, flags) != 0)
      HT_THROW(what, ": corrupt or truncated JPEG: ", error_of(h), " (", size, " bytes)");
    for (size_t p = 0; p < size_t(img.width) * img.height; ++p) {
      const uint8_t* q = &cmyk[4 * p];
      const int r = q[0] * q[3] / 255, g = q[1] * q[3] / 255, b = q[2] * q[3] / 255;
      if (channels == 3) {
        img.pixels[3 * p] = uint8_t(r);
        img.pixels[3 * p + 1] = uint8_t(g);
        img.pixels[3 * p + 2] = uint8_t(b);
      } else {
        img.pixels[p] = uint8_t((299 * r + 587 * g + 114 * b + 500) / 1000);  // ITU-R BT.601 luma, as JPEG's
      }
    }
    return img;
  }
  if (tjDecompress2(h.h, data, (unsigned long)size, img.pixels.data(), img.width, 0, img.height,
                    channels == 3 ? TJPF_RGB : TJPF_GRAY, flags) != 0)
    HT_THROW(what, ": corrupt or truncated JPEG: ", error_of(h), " (", size, " bytes)");
  return img;
}

void jpeg_scaled_size(int width, int height, double window_width, double window_height, int min_width,
                      int min_height, int* scaled_width, int* scaled_height) {
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  tjscalingfactor best = {1, 1};
  for (int k = 0; k < count; ++k) {
    const tjscalingfactor f = factors[k];
    const double r = double(f.num) / f.denom;
    if (r > 1 || r >= double(best.num) / best.denom) continue;
    // The window at this scale, measured as the decoder scales the whole image.
    const double sx = double(TJSCALED(width, f)) / width, sy = double(TJSCALED(height, f)) / height;
    if (window_width * sx >= min_width && window_height * sy >= min_height) best = f;
  }
  *scaled_width = TJSCALED(width, best);
  *scaled_height = TJSCALED(height, best);
}

std::vector<uint8_t> encode_jpeg(const Image& img, int quality) {
  HT_CHECK(img.channels == 1 || img.channels == 3, "encode_jpeg: 1 or 3 channels, got ", img.channels);
  HT_CHECK(quality >= 1 && quality <= 100, "JPEG quality must be 1..100, got ", quality);
  TjHandle& h = compressor();
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  if (tjCompress2(h.h, img.pixels.data(), img.width, 0, img.height, img.channels == 3 ? TJPF_RGB : TJPF_GRAY, &buf,
                  &size, img.channels == 3 ? TJSAMP_420 : TJSAMP_GRAY, quality, TJFLAG_ACCURATEDCT) != 0) {
    const std::string why = error_of(h);
    tjFree(buf);
    HT_THROW("cannot encode a ", img.width, "x", img.height, " JPEG: ", why);
  }
  std::vector<uint8_t> out(buf, buf + size);
  tjFree(buf);
  return out;
}

Image decode_jpeg(const std::string& path, int channels) {
  std::vector<unsigned char> data = read_whole_file(path);
  HT_CHECK(!data.empty(), shown_name(path), ": empty file (corrupt JPEG)");
  return decode_jpeg_bytes(data.data(), data.size(), channels, shown_name(path));
}

ImageInfo read_image_info(const std::vector<uint8_t>& bytes, const std::string& path) {
  static const uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  ImageInfo info;
  if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) {
    const JpegHeader hdr = read_jpeg_header(bytes.data(), bytes.size(), shown_name(path));
    info.kind = ImageInfo::kJpeg;
    info.width = hdr.width;
    info.height = hdr.height;
    return info;
  }
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPngSignature, 8) == 0) {
    png_image pi;
    std::memset(&pi, 0, sizeof pi);
    pi.version = PNG_IMAGE_VERSION;
    // Reads the signature and IHDR only; the simplified API reports errors in pi.message (no longjmp).
    if (!png_image_begin_read_from_memory(&pi, bytes.data(), bytes.size()))
      HT_THROW(shown_name(path), ": corrupt PNG: ", pi.message);
    info.kind = ImageInfo::kPng;
    info.width = int(std::min<png_uint_32>(pi.width, INT32_MAX));
    info.height = int(std::min<png_uint_32>(pi.height, INT32_MAX));
    png_image_free(&pi);
    return info;
  }
  std::string start;
  for (size_t k = 0; k < std::min<size_t>(bytes.size(), 4); ++k) {
    char hex[8];
    std::snprintf(hex, sizeof hex, " 0x%02x", bytes[k]);
    start += hex;
  }
  HT_THROW(shown_name(path), ": neither a JPEG nor a PNG file (", bytes.empty() ? "empty" : "starts with" + start,
           "; JPEG and PNG only, recognised by their first bytes)");
}

void check_pixels(const ImageInfo& info, int64_t max_pixels, const std::string& path) {
  const int64_t pixels = int64_t(info.width) * info.height;
  HT_CHECK(max_pixels <= 0 || pixels <= max_pixels, shown_name(path), ": the image is ", info.width, "x", info.height,
           " (", pixels, " pixels), more than --max-pixels ", max_pixels,
           ": refused before decoding (a damaged or hostile header, or raise --max-pixels)");
}

Image decode_png_bytes(const std::vector<uint8_t>& data, int channels, const std::string& path) {
  HT_CHECK(channels == 1 || channels == 3, "channels must be 1 or 3, got ", channels);
  png_image pi;
  std::memset(&pi, 0, sizeof pi);
  pi.version = PNG_IMAGE_VERSION;
  // The simplified API reports errors in pi.message instead of longjmp-ing through our frames.
  if (!png_image_begin_read_from_memory(&pi, data.data(), data.size()))
    HT_THROW(shown_name(path), ": corrupt PNG: ", pi.message);
  pi.format = channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
  Image img;
  img.width = int(pi.width);
  img.height = int(pi.height);
  img.channels = channels;
  img.pixels.resize(PNG_IMAGE_SIZE(pi));
  if (!png_image_finish_read(&pi, nullptr, img.pixels.data(), 0, nullptr)) {
    std::string why = pi.message;
    png_image_free(&pi);
    HT_THROW(shown_name(path), ": corrupt or truncated PNG: ", why);
  }
  return img;
}

Image decode_png(const std::string& path, int channels) {
  return decode_png_bytes(read_whole_file(path), channels, path);
}

Image decode_image(const std::string& path, int channels, int64_t max_pixels) {
  const std::vector<uint8_t> bytes = read_whole_file(path);
  const ImageInfo info = read_image_info(bytes, path);
  check_pixels(info, max_pixels, path);
  if (info.kind == ImageInfo::kPng) return decode_png_bytes(bytes, channels, path);
  return decode_jpeg_bytes(bytes.data(), bytes.size(), channels, shown_name(path));
}

Image resize_bilinear(const Image& in, int out_h, int out_w) {
  const int C = in.channels, H = in.height, W = in.width;
  HT_CHECK(H > 0 && W > 0 && out_h > 0 && out_w > 0, "bad image or target size");
  Image out;
  out.height = out_h;
  out.width = out_w;
  out.channels = C;
  out.pixels.resize(size_t(out_h) * out_w * C);
  const double sy = double(out_h) / H, sx = double(out_w) / W;
  for (int y = 0; y < out_h; ++y) {
    const double fy = std::clamp((y + 0.5) / sy - 0.5, 0.0, double(H - 1));
    const int y0 = int(fy), y1 = std::min(y0 + 1, H - 1);
    const double wy = fy - y0;
    for (int x = 0; x < out_w; ++x) {
      const double fx = std::clamp((x + 0.5) / sx - 0.5, 0.0, double(W - 1));
      const int x0 = int(fx), x1 = std::min(x0 + 1, W - 1);
      const double wx = fx - x0;
      for (int c = 0; c < C; ++c) {
        auto px = [&](int yy, int xx) { return double(in.pixels[(size_t(yy) * W + xx) * C + c]); };
        const double v =
            (1 - wy) * ((1 - wx) * px(y0, x0) + wx * px(y0, x1)) + wy * ((1 - wx) * px(y1, x0) + wx * px(y1, x1));
        out.pixels[(size_t(y) * out_w + x) * C + c] = uint8_t(std::lround(std::clamp(v, 0.0, 255.0)));
      }
    }
  }
  return out;
}

Placement letterbox_placement(int W, int H, int size) {
  HT_CHECK(H > 0 && W > 0 && size > 0, "bad image or target size");
  const double r = double(size) / std::max(H, W);
  const int h = std::clamp(int(std::lround(H * r)), 1, size), w = std::clamp(int(std::lround(W * r)), 1, size);
  Placement p;
  p.scale_x = double(w) / W;
  p.scale_y = double(h) / H;
  p.pad_x = (size - w) / 2;
  p.pad_y = (size - h) / 2;
  return p;
}

Placement letterbox(const Image& in, int size, uint8_t fill, uint8_t* out) {
  const int C = in.channels, H = in.height, W = in.width;
  const Placement p = letterbox_placement(W, H, size);
  const int w = int(std::lround(p.scale_x * W)), h = int(std::lround(p.scale_y * H));
  std::fill(out, out + size_t(C) * size * size, fill);
  const Image scaled = h == H && w == W ? in : resize_bilinear(in, h, w);
  for (int c = 0; c < C; ++c)
    for (int y = 0; y < h; ++y) {
      uint8_t* row = out + (size_t(c) * size + p.pad_y + y) * size + p.pad_x;
      for (int x = 0; x < w; ++x) row[x] = scaled.pixels[(size_t(y) * w + x) * C + c];
    }
  return p;
}

void resize_center_crop(const Image& in, int size, uint8_t* out) {
  const int C = in.channels, H = in.height, W = in.width;
  HT_CHECK(H > 0 && W > 0 && size > 0, "bad image or target size");
  if (H == size && W == size) {
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x)
        for (int c = 0; c < C; ++c) out[(size_t(c) * size + y) * size + x] = in.pixels[(size_t(y) * W + x) * C + c];
    return;
  }
  // Scale so the shorter side becomes `size`; the crop window is centred in the scaled image.
  double scale = double(size) / std::min(H, W);
  double sh = H * scale, sw = W * scale;
  double oy = (sh - size) / 2, ox = (sw - size) / 2;
  for (int y = 0; y < size; ++y) {
    double fy = std::clamp((y + oy + 0.5) / scale - 0.5, 0.0, double(H - 1));
    int y0 = int(fy), y1 = std::min(y0 + 1, H - 1);
    double wy = fy - y0;
    for (int x = 0; x < size; ++x) {
      double fx = std::clamp((x + ox + 0.5) / scale - 0.5, 0.0, double(W - 1));
      int x0 = int(fx), x1 = std::min(x0 + 1, W - 1);
      double wx = fx - x0;
      for (int c = 0; c < C; ++c) {
        auto px = [&](int yy, int xx) { return double(in.pixels[(size_t(yy) * W + xx) * C + c]); };
        double v = (1 - wy) * ((1 - wx) * px(y0, x0) + wx * px(y0, x1)) + wy * ((1 - wx) * px(y1, x0) + wx * px(y1, x1));
        out[(size_t(c) * size + y) * size + x] = uint8_t(std::lround(std::clamp(v, 0.0, 255.0)));
      }
    }
  }
}

}  // namespace hetrain::data
