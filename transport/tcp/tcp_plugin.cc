// The TCP backend's side of the plugin contract (transport/plugin.h).
#include <cstring>

#include "transport/tcp/tcp_transport.h"

namespace tessera {
namespace {

// A listening address as a card: the IPv4 address and port, network byte order.
std::string EncodeAddress(const SocketAddress& a) {
  std::string card(sizeof(a.ip_be) + sizeof(a.port_be), '\0');
  std::memcpy(&card[0], &a.ip_be, sizeof(a.ip_be));
  std::memcpy(&card[sizeof(a.ip_be)], &a.port_be, sizeof(a.port_be));
  return card;
}

Status DecodeAddress(const std::string& card, SocketAddress* a) {
  if (card.size() != sizeof(a->ip_be) + sizeof(a->port_be)) {
    return InvalidArgument("a TCP card of " + std::to_string(card.size()) + " bytes");
  }
  std::memcpy(&a->ip_be, card.data(), sizeof(a->ip_be));
  std::memcpy(&a->port_be, card.data() + sizeof(a->ip_be), sizeof(a->port_be));
  return Status::Ok();
}

class OpenTcp : public OpenTransport {
 public:
  explicit OpenTcp(uint64_t secret) : secret_(secret) {}

  Status Listen(const Settings& settings) {
    options_ = {settings.tcp_streams, settings.tcp_chunk_bytes, settings.tcp_congestion};
    std::string ip;
    TESSERA_RETURN_IF_ERROR(ChooseLocalAddress(settings.socket_ifname, &ip));
    return tessera::Listen(ip, 0, &listener_, &address_).Annotate("peer listener");
  }

  std::string card() const override { return EncodeAddress(address_); }

  Status Finish(const FinishContext& ctx, std::unique_ptr<Transport>* out) override {
    std::vector<SocketAddress> peers(ctx.nranks);
    for (int r = 0; r < ctx.nranks; ++r) {
      TESSERA_RETURN_IF_ERROR(DecodeAddress(ctx.cards[r], &peers[r]).Annotate("rank " + std::to_string(r)));
    }
    auto tcp = std::make_unique<TcpTransport>(options_, ctx.rank, secret_, std::move(listener_), std::move(peers));
    note_ = "listening on " + address_.ToString();
    if (!tcp->congestion_note().empty()) note_ += "; TESSERA_TCP_CONGESTION: " + tcp->congestion_note();
    *out = std::move(tcp);
    return Status::Ok();
  }

  std::string note() const override { return note_; }

 private:
  const uint64_t secret_;
  TcpTransport::Options options_;
  Socket listener_;
  SocketAddress address_;
  std::string note_;
};

}  // namespace

Status OpenTcpTransport(const OpenContext& ctx, std::unique_ptr<OpenTransport>* out) {
  auto tcp = std::make_unique<OpenTcp>(ctx.secret);
  TESSERA_RETURN_IF_ERROR(tcp->Listen(*ctx.settings));
  *out = std::move(tcp);
  return Status::Ok();
}

}  // namespace tessera
