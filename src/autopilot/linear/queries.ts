// The GraphQL operations Docket sends Linear: only the fields admission and the status mapping need
// (field names from @linear/sdk's schema types), each connection paged with first/after.

const ISSUE = `identifier number title description url updatedAt
  state { name type }
  team { key }
  project { id }
  labels(first: $labels) { nodes { name } }`;

export const GET_ISSUE = `query DocketIssue($id: String!, $labels: Int!) {
  issue(id: $id) { ${ISSUE} }
}`;

/** The issues blocking one: relations of type "blocks" naming it as the related issue. */
export const BLOCKERS = `query DocketBlockers($id: String!, $first: Int!, $after: String, $labels: Int!) {
  issue(id: $id) {
    inverseRelations(first: $first, after: $after) {
      nodes { type issue { ${ISSUE} } }
      pageInfo { hasNextPage endCursor }
    }
  }
}`;

/** The issue's history: who changed its labels or its state, a person, an app's user or a bot. */
export const HISTORY = `query DocketHistory($id: String!, $first: Int!, $after: String) {
  issue(id: $id) {
    history(first: $first, after: $after) {
      nodes {
        id createdAt
        actor { id displayName app }
        botActor { id type name }
        addedLabels { name }
        removedLabels { name }
        toState { name }
      }
      pageInfo { hasNextPage endCursor }
    }
  }
}`;

export const READY_ISSUES = `query DocketReadyIssues($filter: IssueFilter!, $first: Int!, $after: String) {
  issues(filter: $filter, first: $first, after: $after, orderBy: createdAt) {
    nodes { number updatedAt }
    pageInfo { hasNextPage endCursor }
  }
}`;

export const FIND_COMMENT = `query DocketFindComment($id: String!, $marker: String!, $first: Int!, $after: String) {
  issue(id: $id) {
    comments(first: $first, after: $after, filter: { body: { contains: $marker } }) {
      nodes { id url }
      pageInfo { hasNextPage endCursor }
    }
  }
}`;

export const POST_COMMENT = `mutation DocketComment($input: CommentCreateInput!) {
  commentCreate(input: $input) { success comment { id url } }
}`;

/** What the status mapping needs: the issue's id and labels, and its team's states by name. */
export const STATUS_TARGETS = `query DocketStatusTargets($id: String!, $labels: Int!, $states: [String!]!) {
  issue(id: $id) {
    id
    labels(first: $labels) { nodes { id name } }
    team { states(filter: { name: { in: $states } }) { nodes { id name } } }
  }
}`;

/** Links a URL to the issue as an attachment; Linear keeps one attachment per issue and URL, so linking again changes nothing. */
export const LINK_URL = `mutation DocketLinkPullRequest($issueId: String!, $url: String!, $title: String) {
  attachmentLinkURL(issueId: $issueId, url: $url, title: $title) { success attachment { id url } }
}`;

export const UPDATE_ISSUE = `mutation DocketMoveIssue($id: String!, $input: IssueUpdateInput!) {
  issueUpdate(id: $id, input: $input) { success }
}`;

export interface IssueNode {
  identifier: string;
  number: number;
  title: string;
  description: string | null;
  url: string;
  updatedAt: string;
  state: { name: string; type: string };
  team: { key: string };
  project: { id: string } | null;
  labels: { nodes: { name: string }[] };
}

export interface HistoryNode {
  id: string;
  createdAt: string;
  actor: { id: string; displayName: string; app: boolean } | null;
  botActor: { id: string | null; type: string; name: string | null } | null;
  addedLabels: { name: string }[] | null;
  removedLabels: { name: string }[] | null;
  toState: { name: string } | null;
}

export interface Connection<T> {
  nodes: T[];
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
}
