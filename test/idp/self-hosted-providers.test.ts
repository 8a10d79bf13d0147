/**
 * Issue 16: self-hosted identity providers and an old in-house server, each a profile
 * (test/idp/profiles/) reproducing its documented request checks and response/error shapes over
 * real TLS, run with the real token client and, for some, the whole proxy.
 */
import { duende } from "./profiles/duende.js";
import { hydra } from "./profiles/hydra.js";
import { inHouseLegacy } from "./profiles/in-house-legacy.js";
import { keycloak } from "./profiles/keycloak.js";
import { pingFederate } from "./profiles/pingfederate.js";
import { springAuthorizationServer } from "./profiles/spring-authorization-server.js";
import { zitadel } from "./profiles/zitadel.js";
import { describeProfile } from "./support/run-profile.js";

for (const profile of [
  keycloak,
  pingFederate,
  springAuthorizationServer,
  hydra,
  zitadel,
  duende,
  inHouseLegacy,
]) {
  describeProfile(profile);
}
