import HTTPTypes
import Hummingbird
import NIOConcurrencyHelpers
import NIOCore
import Storage
import Support

/// The request context of the API: Hummingbird's core context, the peer's address, and what the middleware found out
/// about the request: who it is from (``ClientAddressMiddleware``), which key sent it (``KeyAuthenticationMiddleware``)
/// and what it is, for its metrics (``RequestLabel``).
struct APIRequestContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    let remoteAddress: SocketAddress?
    /// The client, behind trusted proxies the forwarded one (nil: the peer's address is not an IP address).
    var client: ClientAddress?
    /// The key the per-address limits count by: the client's address, its IPv6 prefix; `unknown` without one.
    var addressKey = "unknown"
    /// The provider key that authenticated the request (set on `/v1` routes before their handler runs).
    var key: ProviderStore.Key?
    /// What the request is, named by whoever learns it (a route, or the chat command once parsed).
    let label = RequestLabel()

    init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteAddress = source.channel.remoteAddress
    }

    /// The key a `/v1` route's ``KeyAuthenticationMiddleware`` put here.
    func requireKey() throws -> ProviderStore.Key {
        guard let key else { throw HTTPError(.internalServerError, message: "route without key authentication") }
        return key
    }
}

/// What a request is, for its metrics (`command` label): a reference the context carries, so a handler deep inside
/// the middleware can name the request for ``RequestMetricsMiddleware`` outside it.
final class RequestLabel: Sendable {
    private let name = NIOLockedValueBox("unparsed")

    var value: String {
        get { name.withLockedValue { $0 } }
        set { name.withLockedValue { $0 = newValue } }
    }
}

/// Finds who a request is from once, for every route: the peer, or behind a trusted proxy the address it forwarded
/// (`X-Forwarded-For`), and the key the per-address limits count it by.
struct ClientAddressMiddleware: RouterMiddleware {
    typealias Context = APIRequestContext
    static let forwardedFor = HTTPField.Name("X-Forwarded-For")!

    let resolver: ClientAddressResolver

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let peer = context.remoteAddress?.ipAddress.flatMap(ClientAddress.init)
        context.client = resolver.client(peer: peer, forwardedFor: request.headers[Self.forwardedFor])
        if let client = context.client { context.addressKey = resolver.limitKey(client) }
        return try await next(request, context)
    }
}

/// The per-address limit (`api_rate_per_ip`, `api_burst_per_ip`): past it, 429 with `Retry-After` and the handler
/// never runs.
struct AddressLimitMiddleware: RouterMiddleware {
    typealias Context = APIRequestContext

    let limiter: RateLimiter

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let wait = limiter.take(context.addressKey) { return APIController.tooManyRequests(wait) }
        return try await next(request, context)
    }
}

/// Counts every answer by what the request was (``RequestLabel``) and its status, with its duration
/// (`pushchat_api_requests`, `pushchat_api_request_duration`); a refusal thrown as an error is counted with its status.
struct RequestMetricsMiddleware: RouterMiddleware {
    typealias Context = APIRequestContext

    let metrics: APIMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        do {
            let response = try await next(request, context)
            metrics.request(command: context.label.value, status: response.status.code, duration: start.duration(to: .now))
            return response
        } catch let error as any HTTPResponseError {
            metrics.request(command: context.label.value, status: error.status.code, duration: start.duration(to: .now))
            throw error
        }
    }
}
