//! The IAM actions that authorize the AWS adapters' calls, each named once: the DynamoDB
//! adapter says which one each write is sent as, the endpoint table grants them to each
//! function's role, and the router suite's IAM check holds every call a request makes to its
//! function's grants. Plain names: nothing here calls AWS.

/// DynamoDB, on the table (and its indexes).
pub mod dynamodb {
    pub const GET_ITEM: &str = "dynamodb:GetItem";
    pub const QUERY: &str = "dynamodb:Query";
    pub const PUT_ITEM: &str = "dynamodb:PutItem";
    pub const UPDATE_ITEM: &str = "dynamodb:UpdateItem";
    pub const DELETE_ITEM: &str = "dynamodb:DeleteItem";
    /// A transaction's condition check: an action of its own, which `TransactWriteItems` needs
    /// beside the writes' actions.
    pub const CONDITION_CHECK_ITEM: &str = "dynamodb:ConditionCheckItem";
}

/// KMS, on the envelope key.
pub mod kms {
    pub const GENERATE_DATA_KEY: &str = "kms:GenerateDataKey";
    pub const DECRYPT: &str = "kms:Decrypt";
}

/// SQS, on the certificate time-out queue (and its dead-letter queue).
pub mod sqs {
    pub const SEND_MESSAGE: &str = "sqs:SendMessage";
    pub const RECEIVE_MESSAGE: &str = "sqs:ReceiveMessage";
    pub const DELETE_MESSAGE: &str = "sqs:DeleteMessage";
}

/// SNS, on the account's platform applications and their endpoints (mobile push).
pub mod sns {
    pub const PUBLISH: &str = "sns:Publish";
    pub const CREATE_PLATFORM_ENDPOINT: &str = "sns:CreatePlatformEndpoint";
    pub const SET_ENDPOINT_ATTRIBUTES: &str = "sns:SetEndpointAttributes";
    pub const GET_ENDPOINT_ATTRIBUTES: &str = "sns:GetEndpointAttributes";
    pub const DELETE_ENDPOINT: &str = "sns:DeleteEndpoint";
}
