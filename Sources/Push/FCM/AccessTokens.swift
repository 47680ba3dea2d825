import AsyncHTTPClient
import FCM
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Support
import Synchronization

/// The FCM access token every connection of one sender shares: fetched from the service account's token URI before
/// the first connection opens, again a few minutes before it expires and after a 401, one fetch at a time
/// (``AccessTokenCache``), never one per message.
final class AccessTokens: Sendable {
    let account: ServiceAccount
    let client: HTTPClient
    let logger: Logger
    private let state = Mutex<(cache: AccessTokenCache, generation: Int)>((AccessTokenCache(), 0))
    private let fetches = Atomic<Int>(0)
    /// Signalled when a fetch ends, for the callers of ``ready()`` waiting for it.
    private let settled = QueueSignal()

    /// Told of every fetch that fails (the token URI refused, or did not answer with a token).
    let onFailure: @Sendable () -> Void

    init(account: ServiceAccount, client: HTTPClient, logger: Logger, onFailure: @escaping @Sendable () -> Void = {}) {
        self.account = account
        self.client = client
        self.logger = logger
        self.onFailure = onFailure
    }

    /// Tokens fetched so far.
    var fetched: Int { fetches.load(ordering: .relaxed) }

    /// A good token, fetching one (or waiting for another caller's fetch) when there is none: the link opens only with
    /// one.
    func ready() async throws {
        while true {
            let generation = settled.generation
            switch state.withLock({ $0.cache.token(now: Date()) }) {
            case .use: return
            case .wait:
                // Another caller's fetch: its end (a token, or the refresh given up) wakes this one.
                await settled.wait(after: generation, timeout: .seconds(15))
                try Task.checkCancellation()
            case .refresh: try await refresh()
            }
        }
    }

    /// The token for a request written now, with its generation (for ``rejected(generation:)``); nil when none is
    /// valid. A token due for renewal is still used while the renewal runs in the background.
    func current(now: Date) -> (token: String, generation: Int)? {
        let (action, current, generation) = state.withLock { state in
            (state.cache.token(now: now), state.cache.current, state.generation)
        }
        switch action {
        case .use(let token): return (token, generation)
        case .refresh: Task { try? await self.refresh() }
        case .wait: break
        }
        guard let current, current.expires > now else { return nil }
        return (current.value, generation)
    }

    /// FCM answered 401 to a request made with the token of `generation`: that token is dropped and a new one fetched
    /// (once, however many requests carried it).
    func rejected(generation: Int) {
        let refresh = state.withLock { state -> Bool in
            guard state.generation == generation, let value = state.cache.current?.value else { return false }
            state.cache.rejected(value)
            return true
        }
        if refresh { _ = current(now: Date()) }
    }

    /// Fetches a token (the caller got `.refresh` from the cache) and stores it, or gives the refresh up on failure.
    private func refresh() async throws {
        defer { settled.signal() }
        do {
            let token = try await fetch()
            fetches.add(1, ordering: .relaxed)
            state.withLock { state in
                state.cache.refreshed(token)
                state.generation += 1
            }
            logger.debug("FCM access token fetched", metadata: ["fcm.expires": "\(token.expires)"])
        } catch {
            state.withLock { $0.cache.refreshFailed() }
            onFailure()
            logger.error("Cannot get an FCM access token from \(account.tokenURI.absoluteString): \(error)")
            throw error
        }
    }

    /// Trades a signed assertion for an access token at the token URI.
    private func fetch() async throws -> AccessToken {
        var request = HTTPClientRequest(url: account.tokenURI.absoluteString)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        let assertion = try OAuthAssertion.make(for: account, now: Date())
        request.body = .bytes(ByteBuffer(string: OAuthAssertion.requestBody(assertion: assertion)))
        let response = try await client.execute(request, timeout: .seconds(10))
        let body = try await response.body.collect(upTo: 64 * 1024)
        guard response.status == .ok else {
            throw AccessTokenError(reason: "the token URI answered \(response.status.code): \(Self.errorText(Array(buffer: body)))")
        }
        guard let token = AccessToken(body: Array(buffer: body), now: Date()) else {
            // Never the body: a 200 that does not parse may still hold the token.
            throw AccessTokenError(reason: "the token URI answered 200 with \(body.readableBytes) bytes that are not a token")
        }
        return token
    }
}

extension AccessTokens {
    /// What an error answer says, for the log: OAuth's `error` and `error_description` when it has them (Google's
    /// `invalid_grant`, …), else its first 200 bytes (an error answer carries no token).
    static func errorText(_ body: [UInt8]) -> String {
        if let json = try? JSON.parse(body), let error = json["error"]?.stringValue {
            return [error, json["error_description"]?.stringValue].compactMap { $0 }.joined(separator: ": ")
        }
        return String(decoding: body.prefix(200), as: UTF8.self)
    }
}

/// The token URI refused the service account or answered something else than a token.
struct AccessTokenError: PushChatError {
    typealias Code = ErrorCode<AccessTokenError>
    var code: Code { .refused }
    let reason: String
    var description: String { "FCM access token: \(reason)" }
}

extension ErrorCode where Domain == AccessTokenError {
    static let refused = Self("refused")
}
