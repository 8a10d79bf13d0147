/**
 * Issue 16: hosted identity providers, each a profile (test/idp/profiles/) reproducing its
 * documented request checks and response/error shapes over real TLS, run with the real token
 * client and, for some, the whole proxy. docs/identity-providers.md is the table of these.
 */
import { adfs } from "./profiles/adfs.js";
import { apigee } from "./profiles/apigee.js";
import { auth0 } from "./profiles/auth0.js";
import { azureAdV1 } from "./profiles/azure-ad-v1.js";
import { cognito } from "./profiles/cognito.js";
import { entraIdV2 } from "./profiles/entra-id-v2.js";
import { linkedin } from "./profiles/linkedin.js";
import { okta } from "./profiles/okta.js";
import { salesforce } from "./profiles/salesforce.js";
import { describeProfile } from "./support/run-profile.js";

for (const profile of [
  entraIdV2,
  azureAdV1,
  adfs,
  okta,
  auth0,
  cognito,
  salesforce,
  apigee,
  linkedin,
]) {
  describeProfile(profile);
}
