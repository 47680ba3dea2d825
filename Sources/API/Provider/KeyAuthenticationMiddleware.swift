import Hummingbird
import Logging
import Storage

/// A `/v1` route's gate: names the request for its metrics, authenticates its key (behind the failed-authentication
/// bucket), checks the key's scope for the route and the key's request limit, and puts the key in the context for
/// the handler. Every refusal, the handler's included, is answered as ``ProviderError``'s JSON; any other error as
/// the database's (503 when it is away, 500 otherwise).
struct KeyAuthenticationMiddleware: RouterMiddleware {
    typealias Context = APIRequestContext

    let provider: ProviderController
    /// The endpoint's name in the metrics (`notifications.send`).
    let name: String
    let scope: KeyScope
    /// What the scope allows, for the refusal (`send notifications`).
    let action: String

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        context.label.value = name
        do {
            let key = try await provider.authenticateLimited(request, address: context.addressKey)
            guard key.allows(scope) else { throw ProviderError.missing(scope, for: action) }
            let (requests, _) = provider.keyLimits.limiters(for: key)
            if let wait = requests.take(key.name) {
                throw ProviderError.tooManyRequests(wait, "this key's limit of \(key.requestsPerMinute) requests per minute is spent")
            }
            var context = context
            context.key = key
            return try await next(request, context)
        } catch let error as ProviderError {
            context.logger.debug("Refused provider request", metadata: ["api.error": "\(error)"])
            return error.response()
        } catch {
            return provider.databaseFailure(error, doing: name).response()
        }
    }
}
