import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Support
import Webhooks

/// One POST to a receiver, on a connection of its own: the host resolved here, every address it resolves to checked
/// (a name that points inside the network is refused unless listed; DNS can change between `webhooks add` and now),
/// the connection made to a checked address (not resolved again behind the check), TLS verified against the URL's
/// host, no redirect followed, the whole exchange bounded by `timeout`. Answers the receiver's HTTP status.
struct WebhookPoster: Sendable {
    let tls: NIOSSLContext
    let group: any EventLoopGroup
    let timeout: Duration
    let privateHosts: Set<String>

    /// What went wrong, as the outbox and `webhooks list` show it (no secret, no body).
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    func post(to url: WebhookURL, headers: [(String, String)], body: [UInt8]) async throws -> Int {
        do {
            return try await withDeadline(timeout) {
                let address = try await self.checkedAddress(of: url)
                return try await self.exchange(with: address, url: url, headers: headers, body: body)
            }
        } catch is DeadlineExceeded {
            throw Failure(description: "no answer from \(url.authority) within \(timeout.formatted)")
        }
    }

    /// The first address of the host's that may be connected to (all are checked: any one refused refuses the URL).
    func checkedAddress(of url: WebhookURL) async throws -> SocketAddress {
        let addresses: [SocketAddress]
        if ClientAddress(url.host) != nil {
            addresses = [try SocketAddress(ipAddress: url.host, port: url.port)]
        } else {
            do {
                addresses = try await HostResolver.resolve(host: url.host, port: url.port)
            } catch let error as HostResolver.Failure {
                throw Failure(description: error.description)
            }
        }
        let clients = addresses.compactMap { $0.ipAddress.flatMap(ClientAddress.init) }
        do {
            try url.check(resolved: clients, privateHosts: privateHosts)
        } catch let error as WebhookError {
            throw Failure(description: error.reason)
        }
        guard let first = addresses.first else { throw Failure(description: "\(url.host) does not resolve to any address") }
        return first
    }

    private func exchange(with address: SocketAddress, url: WebhookURL, headers: [(String, String)], body: [UInt8]) async throws -> Int {
        let promise = group.next().makePromise(of: Int.self)
        let secure = url.scheme == "https"
        let serverName = ClientAddress(url.host) == nil ? url.host : nil
        let channel: any Channel
        do {
            channel = try await ClientBootstrap(group: group)
                .connectTimeout(.nanoseconds(timeout.nanoseconds))
                .channelOption(.tcpOption(.tcp_nodelay), value: 1)
                .channelInitializer { [tls] channel in
                    channel.eventLoop.makeCompletedFuture {
                        if secure {
                            try channel.pipeline.syncOperations.addHandler(
                                try NIOSSLClientHandler(context: tls, serverHostname: serverName)
                            )
                        }
                        try channel.pipeline.syncOperations.addHTTPClientHandlers()
                        try channel.pipeline.syncOperations.addHandler(StatusHandler(promise: promise))
                    }
                }
                .connect(to: address)
                .get()
        } catch {
            promise.fail(error)
            throw Failure(description: "cannot connect to \(url.authority): \(error)")
        }
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: url.target)
        // An IPv6 literal in brackets, with or without its port (RFC 9110's Host is uri-host [":" port]).
        let host = url.host.contains(":") ? "[\(url.host)]" : url.host
        head.headers.add(name: "Host", value: url.port == (secure ? 443 : 80) ? host : url.authority)
        head.headers.add(name: "User-Agent", value: "pushchat-webhooks/1")
        head.headers.add(name: "Content-Type", value: "application/json")
        head.headers.add(name: "Content-Length", value: String(body.count))
        head.headers.add(name: "Connection", value: "close")
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(bytes: body))), promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        do {
            let status = try await withTaskCancellationHandler {
                try await promise.futureResult.get()
            } onCancel: {
                channel.close(promise: nil)
            }
            channel.close(promise: nil)
            return status
        } catch {
            channel.close(promise: nil)
            throw error is Failure ? error : Failure(description: "\(url.authority): \(error)")
        }
    }

    /// Completes with the response's status once its head arrived (the body is not read: a receiver's answer carries
    /// nothing the sender needs); a connection that ends first fails it.
    final class StatusHandler: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPClientResponsePart
        let promise: EventLoopPromise<Int>
        private var answered = false

        init(promise: EventLoopPromise<Int>) { self.promise = promise }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if !answered, case .head(let head) = unwrapInboundIn(data), head.status.code >= 200 {
                answered = true
                promise.succeed(Int(head.status.code))
                context.close(promise: nil)
            }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            if !answered {
                answered = true
                promise.fail(error)
            }
            context.close(promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            if !answered {
                answered = true
                promise.fail(Failure(description: "the connection closed before an answer"))
            }
            context.fireChannelInactive()
        }
    }
}
